#include "route/ledger_writer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hone::route {
namespace {

using json = nlohmann::json;

std::string Line(const LedgerEntry& e, const std::vector<BudgetPeriod>& parts) {
  json p = json::array();
  for (const BudgetPeriod& b : parts) p.push_back({b.budget, b.period});
  json j = {{"id", e.id},
            {"time", e.time},
            {"day", e.day},
            {"month", e.month},
            {"tenant", e.tenant},
            {"route", e.route},
            {"upstream", e.upstream},
            {"model", e.model},
            {"prompt_tokens", e.prompt_tokens},
            {"cached_tokens", e.cached_tokens},
            {"completion_tokens", e.completion_tokens},
            {"cost", e.cost},
            {"estimated", e.estimated},
            {"outcome", e.outcome},
            {"parts", std::move(p)}};
  // Invalid UTF-8 is replaced, never thrown on: the row must not be lost.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

bool ParseLine(const std::string& text, Ledger::Settlement* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  try {
    LedgerEntry& e = out->entry;
    e.id = j.at("id").get<std::string>();
    e.time = j.at("time").get<double>();
    e.day = j.at("day").get<std::string>();
    e.month = j.at("month").get<std::string>();
    e.tenant = j.at("tenant").get<std::string>();
    e.route = j.at("route").get<std::string>();
    e.upstream = j.at("upstream").get<std::string>();
    e.model = j.at("model").get<std::string>();
    e.prompt_tokens = j.at("prompt_tokens").get<int64_t>();
    e.cached_tokens = j.at("cached_tokens").get<int64_t>();
    e.completion_tokens = j.at("completion_tokens").get<int64_t>();
    e.cost = j.at("cost").get<int64_t>();
    e.estimated = j.at("estimated").get<bool>();
    e.outcome = j.at("outcome").get<std::string>();
    out->parts.clear();
    for (const json& p : j.at("parts")) out->parts.push_back({p.at(0).get<std::string>(), p.at(1).get<std::string>(), 0});
  } catch (const json::exception&) {
    return false;
  }
  return !out->entry.id.empty();
}

}  // namespace

Result<int> LedgerWriter::Replay(Ledger& ledger, const std::string& path, ReplayAs as) {
  const bool owner = as == ReplayAs::kOwner;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT) return 0;
    return MakeError(ErrorCode::kIo, "cannot read the ledger journal " + path + ": " + std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  std::vector<Ledger::Settlement> batch;
  size_t at = 0;
  int bad = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) {
      // Killed mid-write: that request's answer never went out. (Beside a
      // live owner: a line being written now, the owner's to copy.)
      if (owner)
        std::fprintf(stderr, "[hone] ledger: the journal %s ends in a torn line (%zu bytes), skipped\n",
                     path.c_str(), text.size() - at);
      break;
    }
    Ledger::Settlement one;
    if (ParseLine(text.substr(at, end - at), &one))
      batch.push_back(std::move(one));
    else
      ++bad;
    at = end + 1;
  }
  if (bad && owner)
    std::fprintf(stderr, "[hone] ledger: %d unreadable line(s) in the journal %s, skipped\n", bad,
                 path.c_str());
  if (!batch.empty())
    if (auto r = ledger.SettleMany(batch); !r) return r.error();  // the journal stays for the next try
  if (!owner) return static_cast<int>(batch.size());              // the owner appends to it and empties it
  if (truncate(path.c_str(), 0) != 0 && errno != ENOENT)
    return MakeError(ErrorCode::kIo, "cannot empty the ledger journal " + path + ": " + std::strerror(errno));
  return static_cast<int>(batch.size());
}

Result<std::unique_ptr<LedgerWriter>> LedgerWriter::Open(Ledger* ledger, std::string path) {
  auto replayed = Replay(*ledger, path);
  if (!replayed) return replayed.error();
  if (*replayed > 0)
    std::fprintf(stderr, "[hone] ledger: %d row(s) from the journal of the last run are in the ledger\n", *replayed);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorCode::kIo, "cannot open the ledger journal " + path + ": " + std::strerror(errno));
  return std::unique_ptr<LedgerWriter>(new LedgerWriter(ledger, std::move(path), fd));
}

LedgerWriter::LedgerWriter(Ledger* ledger, std::string path, int fd)
    : ledger_(ledger), path_(std::move(path)), fd_(fd) {
  struct stat st {};
  if (fstat(fd_, &st) == 0) size_ = st.st_size;
  thread_ = std::thread([this] { Loop(); });
}

LedgerWriter::~LedgerWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  close(fd_);
}

Status LedgerWriter::Append(const LedgerEntry& entry, const std::vector<BudgetPeriod>& parts) {
  const std::string line = Line(entry, parts);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : ENOSPC;
        // A partial line would spoil the next one: cut the journal back.
        if (done > 0 && ftruncate(fd_, size_) != 0) {
          // Then the line is torn: Replay skips a line it cannot read.
        }
        return MakeError(ErrorCode::kIo, "cannot write the ledger journal " + path_ + ": " + std::strerror(err));
      }
      done += static_cast<size_t>(n);
    }
    size_ += static_cast<off_t>(line.size());
    queue_.push_back({entry, parts});
    ++appended_;
    // The writer wakes for the first row of a batch (it then lingers for
    // more) and for a full one; a wake per row would cost every request a
    // futex wake-up and the ledger a transaction each.
    wake = queue_.size() == 1 || queue_.size() >= kMaxBatch;
  }
  if (wake) work_cv_.notify_one();
  return Status::Ok();
}

bool LedgerWriter::Flush(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = appended_;
  if (copied_ >= target) return true;
  ++flush_waiters_;  // the writer stops lingering
  work_cv_.notify_one();
  const bool done =
      done_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return copied_ >= target; });
  --flush_waiters_;
  return done;
}

long LedgerWriter::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

void LedgerWriter::Loop() {
  // Bookkeeping yields to requests: the rows are safe in the journal, and a
  // batch's SQLite commit at full niceness took a core from whichever request
  // was running beside it (on 2 cores, one serial routed request in every
  // ~50 ms batch was slowed: p99 580-975 us, 507-554 at nice 10). Raising one's
  // own niceness needs no privilege; at 10 it still gets about a tenth of a
  // core against busy threads, several times what copying rows needs.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kNice);
  double backoff_s = 0.05;
  std::vector<Ledger::Settlement> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !batch.empty(); });
      if (stopping_ && queue_.empty() && batch.empty()) return;
      // Rows are safe in the journal already: wait a little for more, so a
      // steady trickle is one transaction per kLinger, not one per request.
      work_cv_.wait_for(lock, kLinger,
                        [&] { return stopping_ || flush_waiters_ > 0 || queue_.size() >= kMaxBatch; });
      // A batch that failed is retried first, with what came meanwhile.
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    auto r = ledger_->SettleMany(batch);
    std::unique_lock<std::mutex> lock(mu_);
    if (!r) {
      if (errors_++ == 0 || backoff_s >= 5)
        std::fprintf(stderr, "[hone] ledger: cannot copy %zu journal row(s) into the ledger (%s); they stay in %s "
                     "and are retried\n", batch.size(), r.error().message.c_str(), path_.c_str());
      if (stopping_) return;  // the journal keeps them for the next start
      work_cv_.wait_for(lock, std::chrono::duration<double>(backoff_s), [&] { return stopping_; });
      backoff_s = std::min(5.0, backoff_s * 2);
      continue;
    }
    backoff_s = 0.05;
    copied_ += batch.size();
    batch.clear();
    // Everything written is in the ledger: the journal starts over. Appends
    // hold mu_ too, so none is cut off.
    if (copied_ == appended_ && size_ > 0) {
      if (ftruncate(fd_, 0) == 0) size_ = 0;
    }
    lock.unlock();
    done_cv_.notify_all();
  }
}

}  // namespace hone::route
