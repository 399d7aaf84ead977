#include "route/spend.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/utf8.h"
#include "route/route_metrics.h"

namespace hone::route {
namespace {

using json = nlohmann::ordered_json;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Strftime(const std::tm& tm, const char* fmt) {
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, fmt, &tm));
}

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

double Money(int64_t micro) { return static_cast<double>(micro) / 1e6; }

// Valid UTF-8, at most ~300 bytes: an upstream's error text may be cut in
// the middle of a character, and PostgreSQL refuses invalid text (the row
// would be lost).
std::string CleanText(const std::string& s) { return engine::SanitizeUtf8(std::string_view(s).substr(0, 300)); }

// A series' label set for one budget window.
std::string BudgetLabels(const std::string& budget, const char* window) {
  return Labels({{"budget", budget}, {"window", window}});
}

}  // namespace

PeriodKeys PeriodsAt(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  PeriodKeys k;
  k.day = Strftime(tm, "%Y-%m-%d");
  k.month = Strftime(tm, "%Y-%m");
  std::tm next_day = tm;
  next_day.tm_mday += 1;
  next_day.tm_hour = next_day.tm_min = next_day.tm_sec = 0;
  next_day.tm_isdst = -1;
  std::tm next_month = tm;
  next_month.tm_mon += 1;
  next_month.tm_mday = 1;
  next_month.tm_hour = next_month.tm_min = next_month.tm_sec = 0;
  next_month.tm_isdst = -1;
  k.seconds_to_day_end = static_cast<double>(std::mktime(&next_day)) - unix_s;
  k.seconds_to_month_end = static_cast<double>(std::mktime(&next_month)) - unix_s;
  return k;
}

Status SetLedgerTimeZone(const std::string& zone) {
  if (zone != "UTC" && zone != "Etc/UTC") {
    struct stat st {};
    const std::string file = "/usr/share/zoneinfo/" + zone;
    if (zone.find("..") != std::string::npos || stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return MakeError(ErrorCode::kInvalidArgument,
                       "[spend] timezone '" + zone + "' is not a known zone (none at " + file + ")");
  }
  setenv("TZ", zone == "UTC" ? "UTC0" : zone.c_str(), 1);
  tzset();
  return Status::Ok();
}

std::string FormatMoney(int64_t micro) {
  char buf[48];
  const double v = Money(micro);
  // Cents where that is exact enough; more digits for tiny amounts.
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1 || micro == 0 ? "%.2f" : "%.4f", v);
  return buf;
}

Result<std::unique_ptr<Spend>> Spend::Open(const SpendConfig& config, const std::string& state_dir,
                                           bool serving) {
  std::unique_ptr<SqlConn> conn;
  int lock_fd = -1;
  if (config.ledger == "postgres") {
    auto c = OpenPostgres(config.postgres_url);
    if (!c) return c.error();
    conn = std::move(*c);
  } else {
    std::error_code ec;
    // A reader (hone spend) must not create an empty ledger where none is.
    if (!serving && !std::filesystem::exists(state_dir + "/ledger.db"))
      return MakeError(ErrorCode::kNotFound, "no ledger at " + state_dir +
                                                 "/ledger.db: hone serve writes it once its config has an "
                                                 "[[upstream]] (give --config or --state-dir)");
    std::filesystem::create_directories(state_dir, ec);
    if (ec) return MakeError(ErrorCode::kIo, "cannot create the state folder " + state_dir + ": " + ec.message());
    if (serving) {
      const std::string lock = state_dir + "/ledger.lock";
      lock_fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (lock_fd < 0) return MakeError(ErrorCode::kIo, "cannot open " + lock + ": " + std::strerror(errno));
      if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        close(lock_fd);
        return MakeError(ErrorCode::kUnavailable,
                         "the ledger in " + state_dir +
                             " is in use by another hone serve; give each server its own --state-dir, or share "
                             "budgets between servers through PostgreSQL ([spend] ledger = \"postgres\")");
      }
    }
    auto c = OpenSqlite(state_dir + "/ledger.db");
    if (!c) {
      if (lock_fd >= 0) close(lock_fd);
      return c.error();
    }
    conn = std::move(*c);
  }
  auto ledger = Ledger::Open(std::move(conn));
  if (!ledger) {
    if (lock_fd >= 0) close(lock_fd);
    return ledger.error();
  }
  const bool in_memory = lock_fd >= 0;
  const std::string journal = state_dir + "/ledger.journal";
  std::unique_ptr<LedgerWriter> writer;
  if (in_memory) {
    // This process owns the file: any reservation in it is a dead process's.
    if (Status s = (*ledger)->ResetReservations(); !s) {
      close(lock_fd);
      return s.error();
    }
    auto w = LedgerWriter::Open(ledger->get(), journal);  // replays what the last run left
    if (!w) {
      close(lock_fd);
      return w.error();
    }
    writer = std::move(*w);
  } else if (config.ledger != "postgres") {
    // A reader: where no server owns the ledger, the last one's journal
    // (killed before it copied its rows) goes in first; beside a live
    // server, the rows its writer has not copied yet, so that what a reader
    // shows includes every answer already given.
    const std::string lock = state_dir + "/ledger.lock";
    const int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC);
    const bool owner_alive = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0;
    if (fd >= 0)
      if (auto r = LedgerWriter::Replay(
              **ledger, journal,
              owner_alive ? LedgerWriter::ReplayAs::kBesideOwner : LedgerWriter::ReplayAs::kOwner);
          !r) {
        if (fd >= 0) close(fd);
        return r.error();
      }
    if (fd >= 0) close(fd);
  }
  return std::unique_ptr<Spend>(new Spend(config, std::move(*ledger), in_memory, lock_fd, std::move(writer)));
}

Spend::Spend(SpendConfig config, std::unique_ptr<Ledger> ledger, bool holds_in_memory, int lock_fd,
             std::unique_ptr<LedgerWriter> writer)
    : config_(std::move(config)),
      ledger_(std::move(ledger)),
      writer_(std::move(writer)),
      holds_in_memory_(holds_in_memory),
      lock_fd_(lock_fd),
      id_prefix_("sp-" + RandomHex(6) + "-") {
  if (!config_.alert_webhook.empty()) hook_thread_ = std::thread([this] { WebhookLoop(); });
}

Spend::~Spend() {
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    stopping_ = true;
  }
  hook_cv_.notify_all();
  if (hook_thread_.joinable()) hook_thread_.join();
  // The journal's rows go in while this process still owns the ledger: a
  // server started next must not replay a journal that is still being copied.
  writer_.reset();
  if (lock_fd_ >= 0) close(lock_fd_);
}

Status Spend::ReserveInMemory(const std::vector<BudgetPeriod>& parts, int64_t amount, BudgetPeriod* refused) {
  std::lock_guard<std::mutex> lock(mem_mu_);
  for (const BudgetPeriod& p : parts) {
    Held& h = mem_[{p.budget, p.period}];
    if (!h.loaded) {  // the first use of this period in this process: its spend so far
      FlushWriter();  // appends hold mem_mu_ too: none is missed or counted twice
      auto u = ledger_->Usage({p.period});
      if (!u) return u.error();
      for (const BudgetUsage& x : *u)
        if (x.budget == p.budget) h.spent = x.spent;
      h.loaded = true;
    }
    if (h.spent + h.reserved + amount > p.cap) {
      *refused = p;
      return MakeError(ErrorCode::kRateLimited, "budget '" + p.budget + "' " + p.period + " is spent");
    }
  }
  for (const BudgetPeriod& p : parts) mem_[{p.budget, p.period}].reserved += amount;
  return Status::Ok();
}

void Spend::UnreserveInMemory(const std::vector<BudgetPeriod>& parts, int64_t amount) {
  std::lock_guard<std::mutex> lock(mem_mu_);
  for (const BudgetPeriod& p : parts) mem_[{p.budget, p.period}].reserved -= amount;
}

std::vector<BudgetPeriod> Spend::PartsFor(const std::string& upstream, const std::string& tenant,
                                          const PeriodKeys& keys) const {
  std::vector<BudgetPeriod> parts;
  for (const BudgetConfig& b : config_.budgets) {
    const bool applies = b.scope == BudgetConfig::Scope::kGlobal ||
                         (b.scope == BudgetConfig::Scope::kUpstream && b.scope_name == upstream) ||
                         (b.scope == BudgetConfig::Scope::kTenant && b.scope_name == tenant);
    if (!applies) continue;
    if (b.monthly > 0) parts.push_back({b.name, "M:" + keys.month, b.monthly});
    if (b.daily > 0) parts.push_back({b.name, "D:" + keys.day, b.daily});
  }
  return parts;
}

Result<std::shared_ptr<SpendHold>> Spend::Reserve(const std::string& route, const std::string& upstream,
                                                  const std::string& model, const std::string& tenant,
                                                  const Price& price, int64_t prompt_token_bound,
                                                  int max_tokens) {
  const double now = Now();
  const PeriodKeys keys = PeriodsAt(now);
  auto hold = std::make_shared<SpendHold>();
  hold->id = id_prefix_ + std::to_string(++seq_);
  hold->route = route;
  hold->upstream = upstream;
  hold->model = model;
  hold->tenant = tenant;
  hold->price = price;
  hold->day = keys.day;
  hold->month = keys.month;
  hold->parts = PartsFor(upstream, tenant, keys);
  const double worst = static_cast<double>(prompt_token_bound) * std::max(price.input_per_m, price.cached_per_m) +
                       static_cast<double>(std::max(0, max_tokens)) * price.output_per_m;
  hold->reserved = static_cast<int64_t>(std::ceil(worst));
  // A free target (local, unpriced) is never refused: its cost still counts
  // against the budgets when it settles.
  if (hold->reserved > 0 && !hold->parts.empty()) {
    BudgetPeriod refused;
    Status s = holds_in_memory_
                   ? ReserveInMemory(hold->parts, hold->reserved, &refused)
                   : ledger_->Reserve(hold->id, hold->reserved, hold->parts, now + config_.reservation_ttl_s, &refused);
    if (!s) {
      if (s.error().code != ErrorCode::kRateLimited) {
        std::lock_guard<std::mutex> lock(mu_);
        ++ledger_errors_;
        std::fprintf(stderr, "[hone] ledger: cannot reserve (%s); upstream %s is not used meanwhile\n",
                     s.error().message.c_str(), upstream.c_str());
        return MakeError(ErrorCode::kUnavailable, "the spend ledger cannot be reached: " + s.error().message);
      }
      const bool monthly = refused.period.rfind("M:", 0) == 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++refusals_by_budget_[refused.budget];
      }
      // The first refusal of a period is the cap's alert: the spend may stop
      // short of 100% (the next worst case no longer fits), but from here
      // on this budget's requests go local or are refused.
      Alert(refused, -1, 1.0);
      Error e = MakeError(ErrorCode::kRateLimited,
                          "budget '" + refused.budget + "' is spent for " + (monthly ? "the month " : "the day ") +
                              refused.period.substr(2) + " (cap " + FormatMoney(refused.cap) +
                              "; this request could cost up to " + FormatMoney(hold->reserved) + ")");
      e.retry_after_s = static_cast<int>(std::ceil(monthly ? keys.seconds_to_month_end : keys.seconds_to_day_end));
      return e;
    }
  } else {
    hold->reserved = 0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++holds_in_flight_;
  if (hold->reserved > 0) live_.insert(hold->id);
  return hold;
}

void Spend::Settle(SpendHold& hold, const backend::Usage& usage, bool estimated, const std::string& outcome) {
  if (hold.done) return;
  hold.done = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --holds_in_flight_;
    live_.erase(hold.id);
  }
  LedgerEntry e;
  e.id = hold.id;
  e.time = Now();
  e.day = hold.day;
  e.month = hold.month;
  e.tenant = hold.tenant;
  e.route = hold.route;
  e.upstream = hold.upstream;
  e.model = hold.model;
  e.prompt_tokens = usage.prompt_tokens;
  e.cached_tokens = std::min(usage.cached_tokens, usage.prompt_tokens);
  e.completion_tokens = usage.completion_tokens;
  const double cost = hold.price.input_per_m * static_cast<double>(e.prompt_tokens - e.cached_tokens) +
                      hold.price.cached_per_m * static_cast<double>(e.cached_tokens) +
                      hold.price.output_per_m * static_cast<double>(e.completion_tokens);
  e.cost = static_cast<int64_t>(std::llround(cost));
  e.estimated = estimated;
  e.outcome = CleanText(outcome);
  if (writer_ && SettleThroughJournal(hold, e)) return;
  std::vector<int64_t> spent;
  // A ledger that is down for a moment must not lose the row: retried a few
  // times (settling is idempotent), then logged with every field.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = ledger_->Settle(e, hold.parts, &spent, !holds_in_memory_);
    if (r) {
      if (holds_in_memory_) {
        std::lock_guard<std::mutex> lock(mem_mu_);
        for (size_t i = 0; i < hold.parts.size(); ++i) {
          Held& h = mem_[{hold.parts[i].budget, hold.parts[i].period}];
          h.reserved -= hold.reserved;
          if (*r && i < spent.size()) h.spent = spent[i], h.loaded = true;  // the ledger's total, all writers
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      spent_by_upstream_[hold.upstream] += Money(e.cost);
      break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++ledger_errors_;
    if (attempt == 2) {
      std::fprintf(stderr,
                   "[hone] ledger: cannot settle %s (%s): route=%s upstream=%s model=%s tenant=%s "
                   "prompt_tokens=%lld completion_tokens=%lld cost=%s\n",
                   e.id.c_str(), r.error().message.c_str(), e.route.c_str(), e.upstream.c_str(), e.model.c_str(),
                   e.tenant.c_str(), static_cast<long long>(e.prompt_tokens),
                   static_cast<long long>(e.completion_tokens), FormatMoney(e.cost).c_str());
      if (holds_in_memory_) {
        // The row is lost, but not the money: the cost still counts against
        // the budgets for as long as this process runs.
        std::lock_guard<std::mutex> mem(mem_mu_);
        for (const BudgetPeriod& p : hold.parts) {
          Held& h = mem_[{p.budget, p.period}];
          h.reserved -= hold.reserved;
          h.spent += e.cost;
        }
      }
      return;
    }
  }
  if (!spent.empty()) CheckAlerts(hold.parts, spent);
}

// The journal line, then the holds and the spend in memory, under mem_mu_
// (so a period first loaded from the ledger meanwhile sees this row exactly
// once). False: the journal cannot be written; the caller settles directly.
bool Spend::SettleThroughJournal(const SpendHold& hold, const LedgerEntry& e) {
  std::vector<int64_t> spent;
  {
    std::lock_guard<std::mutex> lock(mem_mu_);
    if (Status w = writer_->Append(e, hold.parts); !w) {
      std::lock_guard<std::mutex> l(mu_);
      ++ledger_errors_;
      std::fprintf(stderr, "[hone] ledger: %s; %s is settled directly\n", w.error().message.c_str(), e.id.c_str());
      return false;
    }
    for (const BudgetPeriod& p : hold.parts) {
      Held& h = mem_[{p.budget, p.period}];
      h.reserved -= hold.reserved;
      if (h.loaded) {
        h.spent += e.cost;
      } else {  // not reserved in this process yet: its total from the ledger, this row included
        FlushWriter();
        if (auto u = ledger_->Usage({p.period}); u) {
          for (const BudgetUsage& x : *u)
            if (x.budget == p.budget) h.spent = x.spent;
          h.loaded = true;
        }
      }
      spent.push_back(h.spent);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    spent_by_upstream_[hold.upstream] += Money(e.cost);
  }
  CheckAlerts(hold.parts, spent);
  return true;
}

void Spend::Release(SpendHold& hold) {
  if (hold.done) return;
  hold.done = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --holds_in_flight_;
    live_.erase(hold.id);
  }
  if (hold.reserved == 0) return;
  if (holds_in_memory_) return UnreserveInMemory(hold.parts, hold.reserved);
  if (Status s = ledger_->Release(hold.id); !s) {
    std::lock_guard<std::mutex> lock(mu_);
    ++ledger_errors_;
    std::fprintf(stderr, "[hone] ledger: cannot release %s (%s); it expires by itself\n", hold.id.c_str(),
                 s.error().message.c_str());
  }
}

void Spend::CheckAlerts(const std::vector<BudgetPeriod>& parts, const std::vector<int64_t>& spent) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const BudgetPeriod& p = parts[i];
    const BudgetConfig* b = nullptr;
    for (const BudgetConfig& c : config_.budgets)
      if (c.name == p.budget) b = &c;
    if (!b || p.cap <= 0) continue;
    const double share = static_cast<double>(spent[i]) / static_cast<double>(p.cap);
    std::vector<double> thresholds = b->thresholds;
    thresholds.push_back(1.0);  // the cap itself always alerts
    for (double th : thresholds)
      if (share >= th) Alert(p, spent[i], th);
  }
}

// `spent` < 0: the cap refused a reservation (spent is read back for the message).
void Spend::Alert(const BudgetPeriod& p, int64_t spent, double th) {
  {
    const int permille = static_cast<int>(std::lround(th * 1000));
    const std::string key = p.budget + "|" + p.period + "|" + std::to_string(permille);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!fired_.insert(key).second) return;  // this process saw it already
    }
    auto first = ledger_->MarkAlert(p.budget, p.period, permille, Now());
    if (!first) {  // the ledger is down: try again on the next settle
      std::lock_guard<std::mutex> lock(mu_);
      fired_.erase(key);
      return;
    }
    if (!*first) return;  // another replica fired it
    if (spent < 0) {
      spent = 0;
      FlushWriter();
      if (auto u = ledger_->Usage({p.period}); u)
        for (const BudgetUsage& x : *u)
          if (x.budget == p.budget) spent = x.spent;
    }
    const double share = static_cast<double>(spent) / static_cast<double>(p.cap);
    {
      const bool monthly = p.period.rfind("M:", 0) == 0;
      const char* window = monthly ? "monthly" : "daily";
      if (permille >= 1000)
        std::fprintf(stderr, "[hone] ALERT budget '%s' %s %s is spent: %s of %s; its requests now go local or are refused\n",
                     p.budget.c_str(), window, p.period.substr(2).c_str(), FormatMoney(spent).c_str(),
                     FormatMoney(p.cap).c_str());
      else
        std::fprintf(stderr, "[hone] ALERT budget '%s' %s %s reached %d%%: %s of %s spent\n", p.budget.c_str(),
                     window, p.period.substr(2).c_str(), permille / 10, FormatMoney(spent).c_str(),
                     FormatMoney(p.cap).c_str());
      {
        std::lock_guard<std::mutex> lock(mu_);
        char th_label[16];
        std::snprintf(th_label, sizeof th_label, "%g", th);
        ++alerts_by_budget_[Labels({{"budget", p.budget}, {"window", window}, {"threshold", th_label}})];
      }
      if (!config_.alert_webhook.empty()) {
        json body = {{"type", permille >= 1000 ? "budget_exhausted" : "budget_threshold"},
                     {"budget", p.budget},
                     {"window", window},
                     {"period", p.period.substr(2)},
                     {"threshold", th},
                     {"spent", Money(spent)},
                     {"cap", Money(p.cap)},
                     {"share", share},
                     {"time", Now()}};
        std::lock_guard<std::mutex> lock(hook_mu_);
        if (hook_queue_.size() < 1000) hook_queue_.push_back(body.dump());
        hook_cv_.notify_one();
      }
    }
  }
}

void Spend::WebhookLoop() {
  std::unique_lock<std::mutex> lock(hook_mu_);
  for (;;) {
    hook_cv_.wait(lock, [&] { return stopping_ || !hook_queue_.empty(); });
    if (stopping_) return;
    std::string body = std::move(hook_queue_.front());
    hook_queue_.pop_front();
    lock.unlock();
    // Five tries, 1 s to 16 s apart; a webhook that stays down is logged and
    // dropped. Requests never wait on any of this.
    for (int attempt = 0; attempt < 5; ++attempt) {
      HttpSpec spec;
      spec.url = config_.alert_webhook;
      spec.headers = {"Content-Type: application/json"};
      spec.body = body;
      spec.connect_timeout_s = 5;
      spec.first_byte_timeout_s = 10;
      spec.total_timeout_s = 15;
      auto call = http_.Start(spec);
      const int status = call->WaitStatus(Clock::now() + std::chrono::seconds(15));
      if (status >= 200 && status < 300) {
        (void)call->ReadAll(Clock::now() + std::chrono::seconds(5), 1 << 16);
        break;
      }
      std::fprintf(stderr, "[hone] alert webhook: attempt %d failed (%s)\n", attempt + 1,
                   status ? ("HTTP " + std::to_string(status)).c_str() : call->error_text().c_str());
      std::unique_lock<std::mutex> wait(hook_mu_);
      if (hook_cv_.wait_for(wait, std::chrono::seconds(1 << attempt), [&] { return stopping_; })) return;
    }
    lock.lock();
  }
}

void Spend::Tick() {
  if (++ticks_ % 5 == 0) ledger_->Maintain();
  // The holds of requests still running get a fresh expiry, a third of the
  // TTL before it would pass: a long stream keeps its reservation, and only
  // what a dead process left runs out.
  const double now = Now();
  if (holds_in_memory_) return;  // nothing of this process's is held in the file
  if (now - last_renew_ >= config_.reservation_ttl_s / 3) {
    last_renew_ = now;
    std::vector<std::string> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live.assign(live_.begin(), live_.end());
    }
    if (!live.empty())
      if (Status s = ledger_->Renew(live, now + config_.reservation_ttl_s); !s)
        std::fprintf(stderr, "[hone] ledger: cannot renew %zu reservation(s): %s\n", live.size(),
                     s.error().message.c_str());
  }
  auto freed = ledger_->ExpireReservations(Now());
  if (freed && *freed > 0)
    std::fprintf(stderr, "[hone] ledger: freed %d expired reservation part(s) left by a process that stopped\n",
                 *freed);
}

std::map<std::string, BudgetUsage> Spend::UsageNow(const PeriodKeys& keys) {
  std::map<std::string, BudgetUsage> by;
  FlushWriter();
  if (auto usage = ledger_->Usage({"M:" + keys.month, "D:" + keys.day}); usage)
    for (const BudgetUsage& u : *usage) by[u.budget + "|" + u.period] = u;
  if (holds_in_memory_) {  // the holds are this process's, in memory
    std::lock_guard<std::mutex> lock(mem_mu_);
    for (const auto& [key, h] : mem_) {
      BudgetUsage& u = by[key.first + "|" + key.second];
      u.budget = key.first;
      u.period = key.second;
      u.reserved = h.reserved;
    }
  }
  return by;
}

std::string Spend::Json(const std::string& for_month) {
  const double now = Now();
  const PeriodKeys keys = PeriodsAt(now);
  const std::string month = for_month.empty() ? keys.month : for_month;
  json out = {{"month", month}, {"day", keys.day}, {"timezone", config_.timezone}, {"ledger", ledger_->kind()}};
  FlushWriter();
  auto totals = ledger_->Totals(month);
  auto group = [](const std::vector<SpendTotal>& v) {
    json a = json::array();
    for (const SpendTotal& t : v)
      a.push_back({{"key", t.key},
                   {"requests", t.requests},
                   {"prompt_tokens", t.prompt_tokens},
                   {"completion_tokens", t.completion_tokens},
                   {"cost", Money(t.cost)},
                   {"estimated", t.estimated}});
    return a;
  };
  if (totals) {
    out["total"] = {{"requests", totals->all.requests},
                    {"prompt_tokens", totals->all.prompt_tokens},
                    {"completion_tokens", totals->all.completion_tokens},
                    {"cost", Money(totals->all.cost)},
                    {"estimated", totals->all.estimated}};
    out["by_upstream"] = group(totals->by_upstream);
    out["by_tenant"] = group(totals->by_tenant);
    out["by_route"] = group(totals->by_route);
    out["by_day"] = group(totals->by_day);
  } else {
    out["error"] = totals.error().message;
  }
  std::map<std::string, BudgetUsage> by = UsageNow(keys);
  json budgets = json::array();
  for (const BudgetConfig& b : config_.budgets) {
    json j = {{"name", b.name},
              {"scope", b.scope == BudgetConfig::Scope::kGlobal     ? std::string("global")
                        : b.scope == BudgetConfig::Scope::kUpstream ? "upstream:" + b.scope_name
                                                                    : "tenant:" + b.scope_name},
              {"thresholds", b.thresholds}};
    auto window = [&](const char* name, int64_t cap, const std::string& period) {
      if (cap <= 0) return;
      const BudgetUsage u = by[b.name + "|" + period];
      j[name] = {{"period", period.substr(2)},
                 {"cap", Money(cap)},
                 {"spent", Money(u.spent)},
                 {"reserved", Money(u.reserved)},
                 {"remaining", Money(std::max<int64_t>(0, cap - u.spent - u.reserved))},
                 {"share", static_cast<double>(u.spent) / static_cast<double>(cap)},
                 {"exhausted", u.spent >= cap}};
    };
    window("monthly", b.monthly, "M:" + keys.month);
    window("daily", b.daily, "D:" + keys.day);
    budgets.push_back(std::move(j));
  }
  out["budgets"] = std::move(budgets);
  json held = json::array();
  if (holds_in_memory_) {
    std::lock_guard<std::mutex> lock(mu_);
    out["reservations_in_flight"] = {{"count", live_.size()}, {"held_in", "memory"}};
    for (const std::string& id : live_) held.push_back({{"id", id}});
  } else if (auto f = ledger_->InFlight(now); f) {
    out["reservations_in_flight"] = {{"count", f->first}, {"amount", Money(f->second)}};
  }
  if (auto h = holds_in_memory_ ? Result<std::vector<Ledger::Held>>(std::vector<Ledger::Held>{}) : ledger_->HeldReservations(); h)
    for (const Ledger::Held& r : *h)
      held.push_back({{"id", r.id}, {"amount", Money(r.amount)}, {"expires_in_s", std::max(0.0, r.expires - now)}});
  out["reservations"] = std::move(held);
  return out.dump();
}

void Spend::RenderMetrics(std::string* out) {
  const PeriodKeys keys = PeriodsAt(Now());
  std::map<std::string, BudgetUsage> by = UsageNow(keys);
  std::string spent, remaining, reserved, cap;
  for (const BudgetConfig& b : config_.budgets) {
    for (auto [window, limit, period] : {std::tuple{"monthly", b.monthly, "M:" + keys.month},
                                         std::tuple{"daily", b.daily, "D:" + keys.day}}) {
      if (limit <= 0) continue;
      const BudgetUsage u = by[b.name + "|" + period];
      std::string l = "{";  // (built in steps: GCC 12 warns falsely on "{" + std::string&&)
      l += BudgetLabels(b.name, window);
      l += "}";
      cap += "hone_budget_cap" + l + " " + std::to_string(Money(limit)) + "\n";
      spent += "hone_budget_spent" + l + " " + std::to_string(Money(u.spent)) + "\n";
      reserved += "hone_budget_reserved" + l + " " + std::to_string(Money(u.reserved)) + "\n";
      remaining += "hone_budget_remaining" + l + " " +
                   std::to_string(Money(std::max<int64_t>(0, limit - u.spent - u.reserved))) + "\n";
    }
  }
  if (!cap.empty()) {
    *out += serve::FamilyHeader("hone_budget_cap", "gauge", "Budget cap, in the price currency") + cap;
    *out += serve::FamilyHeader("hone_budget_spent", "gauge", "Spent in the budget period") + spent;
    *out += serve::FamilyHeader("hone_budget_reserved", "gauge", "Held for requests in flight") + reserved;
    *out += serve::FamilyHeader("hone_budget_remaining", "gauge", "Cap minus spent and reserved") + remaining;
  }
  std::lock_guard<std::mutex> lock(mu_);
  *out += serve::FamilyHeader("hone_spend_cost_total", "counter", "Cost settled per upstream, in the price currency");
  for (const auto& [up, v] : spent_by_upstream_)
    *out += "hone_spend_cost_total{" + Labels({{"upstream", up}}) + "} " + std::to_string(v) + "\n";
  *out += serve::FamilyHeader("hone_spend_reservations_in_flight", "gauge", "Budget holds of requests in flight") + "hone_spend_reservations_in_flight " +
          std::to_string(holds_in_flight_) + "\n";
  *out += serve::FamilyHeader("hone_budget_refusals_total", "counter", "Requests a budget refused");
  for (const auto& [b, n] : refusals_by_budget_)
    *out += "hone_budget_refusals_total{" + Labels({{"budget", b}}) + "} " + std::to_string(n) + "\n";
  *out += serve::FamilyHeader("hone_budget_alerts_total", "counter", "Budget threshold alerts fired");
  for (const auto& [l, n] : alerts_by_budget_) *out += "hone_budget_alerts_total{" + l + "} " + std::to_string(n) + "\n";
  *out += serve::FamilyHeader("hone_spend_ledger_errors_total", "counter", "Ledger writes that failed") + "hone_spend_ledger_errors_total " +
          std::to_string(ledger_errors_ + (writer_ ? writer_->errors() : 0)) + "\n";
}

}  // namespace hone::route
