// Settled rows on their way into a SQLite ledger this process owns, off the
// request path.
//
//   Append (the request's thread, before its answer goes out)
//     one line in state_dir/ledger.journal: a single write(2), in the page
//     cache when it returns, so a process killed right after loses nothing
//   the writer thread
//     copies what was appended into SQLite, many rows per transaction (it
//     lingers up to 50 ms for more unless a reader is waiting in Flush), and
//     empties the journal once the ledger holds everything in it
//   Replay (the next owner: hone serve at start, or hone spend when no server
//     holds the ledger)
//     settles every whole line again; settling is idempotent by id, so a row
//     already copied changes nothing. A torn last line (killed mid-write) was
//     never acknowledged to anyone and is skipped with a warning.
//
// Why: a SQLite commit (WAL frames, file locks, three B-trees) cost about
// 115 us of the ~430 us of CPU a routed request took on a 2-core EPYC
// (perf, bench/router_overhead.mjs); a journal line costs one syscall.
// Budgets are unaffected: the caller (Spend) keeps its holds and spend in
// memory and asks Flush before it reads totals back from the ledger.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "route/ledger.h"
#include "util/result.h"

namespace hone::route {

class LedgerWriter {
 public:
  // Replays what a previous owner left in `journal_path`, then opens it for
  // appending. The caller owns the ledger (its lock) and outlives this.
  static Result<std::unique_ptr<LedgerWriter>> Open(Ledger* ledger, std::string journal_path);
  ~LedgerWriter();  // copies what is still queued (a ledger that stays down: it stays in the journal)

  // The journal line, then a place in the queue. An error: the line could
  // not be written (disk full); nothing was kept, and the caller settles
  // the entry in the ledger itself.
  Status Append(const LedgerEntry& entry, const std::vector<BudgetPeriod>& parts);
  // Returns once every entry appended before the call is in the ledger, or
  // false after `timeout_s` (the ledger is failing; the entries stay queued).
  bool Flush(double timeout_s = 5);
  long errors() const;  // failed copies so far (each retried)

  // Settles every whole line of the journal into the ledger and, as its
  // owner, empties it. Returns how many lines it held. kBesideOwner is a
  // reader (hone spend) while a server owns the ledger: the rows that server
  // has not copied yet go in now (settling is idempotent by id, so its own
  // copy later changes nothing); the journal is left as it is.
  enum class ReplayAs { kOwner, kBesideOwner };
  static Result<int> Replay(Ledger& ledger, const std::string& journal_path, ReplayAs as = ReplayAs::kOwner);

 private:
  LedgerWriter(Ledger* ledger, std::string path, int fd);
  void Loop();

  Ledger* const ledger_;
  const std::string path_;
  const int fd_;  // the journal, O_APPEND

  static constexpr size_t kMaxBatch = 512;  // rows per transaction
  static constexpr std::chrono::milliseconds kLinger{50};
  static constexpr int kNice = 10;  // the writer thread's niceness (Loop says why)

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  int flush_waiters_ = 0;                 // GUARDED_BY(mu_): Flush calls waiting
  std::deque<Ledger::Settlement> queue_;  // GUARDED_BY(mu_): appended, not yet taken
  uint64_t appended_ = 0;                 // GUARDED_BY(mu_)
  uint64_t copied_ = 0;                   // GUARDED_BY(mu_): in the ledger
  off_t size_ = 0;                        // GUARDED_BY(mu_): the journal's length
  long errors_ = 0;                       // GUARDED_BY(mu_)
  bool stopping_ = false;                 // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace hone::route
