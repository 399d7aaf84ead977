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

// Valid UTF-8, at most ~300 bytes: an upstream's error text may be cut in
// the middle of a character, and PostgreSQL refuses invalid text (the row
// would be lost).
std::string CleanText(const std::string& s) { return engine::SanitizeUtf8(std::string_view(s).substr(0, 300)); }

}  // namespace

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
      id_prefix_("sp-" + RandomHex(6) + "-"),
      alerts_(std::make_unique<SpendAlerts>(config_, *ledger_, [this] { FlushWriter(); })) {}

Spend::~Spend() {
  alerts_.reset();  // its webhook thread first
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
      alerts_->Fire(refused, -1, 1.0);
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
  if (!spent.empty()) alerts_->Check(hold.parts, spent);
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
  alerts_->Check(hold.parts, spent);
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

}  // namespace hone::route
