// The requests of one upstream that wait for a usable API key, in one queue.
//
// Why: when every key is cooling after 429s, requests that each slept their
// own Retry-After woke together when a cooldown ended, half of them got 429
// again, which cooled every key again, and they ran out of attempts seconds
// into a 30 s deadline (issue 27, item 2). Here a request takes a key only
// at the head of the queue, so they leave one at a time; a key just off its
// cooldown takes one request (a probe) and the next only after the upstream
// answered it, and the pace opens up again as the upstream accepts:
//
//   - Order: a request's place (its Ticket) is taken at its first wait and
//     kept across its attempts, so one that got a 429 goes back ahead of
//     later arrivals. It waits until its route's deadline, not a count of
//     attempts (and leaves at once when no cooldown ends before it).
//   - A key's lane: unpaced (window 0) until the key gets a 429; then a
//     window of 1 release awaiting its status, growing by one with each
//     accepted release made since the 429 (slow start) until it reaches
//     `open_window` and the lane is unpaced again. Paced releases on a key are spaced by a jittered
//     gap, and the first one after a cooldown waits a jittered extra, so two
//     processes (or two keys) that cooled together do not resume together.
//   - A 429 still cools the key in the KeyRing as before (the caller reports
//     it there); the queue only reads the ring's cooldowns.
//   - Leaving at the deadline answers kRateLimited with a Retry-After from
//     the queue: the wait for the next releasable key plus the requests
//     ahead times the measured time between accepted releases.
//
// Locks: mu_ guards everything below it; KeyRing's own lock is taken inside
// mu_ (never the other way round: the ring knows nothing of the queue).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "route/keyring.h"
#include "util/result.h"

namespace hone::route {

struct KeyQueueOptions {
  // The spacing of paced releases on one key is uniform in [gap, 2 gap]; the
  // first release after a cooldown waits uniform [0, gap] past its end.
  double gap_s = 0.02;
  // A paced key whose window reaches this is unpaced again (the upstream's
  // max_concurrent caps it beyond that anyway).
  int open_window = 64;
};

class KeyQueue {
 public:
  // `ring` outlives the queue. Its clock is the queue's clock.
  KeyQueue(KeyRing& ring, KeyQueueOptions options = {}, uint32_t seed = std::random_device{}());

  // A request's place in the queue; 0 until its first wait.
  struct Ticket {
    uint64_t seq = 0;
  };
  // How a released key's attempt went, once its status is known (or it was
  // never sent). Every pick Acquire or TryTake gave must be reported once.
  enum class Verdict { kAccepted, kRateLimited, kOther, kNotSent };

  // Waits in `ticket`'s place for a key, until `deadline` or `cancelled()`.
  // kRateLimited (with retry_after_s from the queue) at the deadline, or at
  // once when no key's cooldown ends before it,
  // kUnavailable when every key is revoked, kAborted when cancelled. An
  // upstream without keys gets an empty pick at once.
  Result<KeyRing::Pick> Acquire(Ticket* ticket, std::chrono::steady_clock::time_point deadline,
                                const std::function<bool()>& cancelled = nullptr);
  void Report(const KeyRing::Pick& pick, Verdict verdict);

  // The non-blocking step Acquire repeats, for tests: joins the queue in
  // `ticket`'s place if it is not in it, and takes a key if it is at the
  // head and one is releasable at `now` (the ring's clock), leaving the
  // queue. Otherwise *wake_at is when the head could next take one
  // (infinity: on the next Report, or not the head).
  std::optional<KeyRing::Pick> TryTake(Ticket* ticket, double now, double* wake_at);
  // Leaves the queue without a key; returns its Retry-After in seconds.
  int Leave(const Ticket& ticket, double now);

  size_t waiting();
  // For /hone/routes: the requests waiting, and the Retry-After a request
  // joining now would get.
  struct View {
    size_t waiting = 0;
    int retry_after_s = 0;
  };
  View Snapshot();

 private:
  // One key's pacing. `pending`: released, status not back yet.
  struct Lane {
    int pending = 0;
    int window = 0;          // 0: unpaced; else the most pending at once
    double not_before = 0;   // the next paced release's earliest time
    double cool_jitter = 0;  // added to the ring's cooldown
    uint64_t paced_since = 0;  // releases numbered up to this went before the last 429
  };
  void SyncLocked();                                   // lanes follow the ring's list
  double ReleasableAtLocked(size_t k, double now);     // +inf: not before a Report
  std::optional<KeyRing::Pick> TakeLocked(double now);
  std::optional<KeyRing::Pick> TryTakeLocked(Ticket* ticket, double now, double* wake_at);
  int LeaveLocked(const Ticket& ticket, double now);
  int RetryAfterLocked(uint64_t seq, double now);
  double SoonestLocked(double now);  // the first cooldown's end (jitter included)
  double JitterLocked(double lo, double hi);

  KeyRing& ring_;
  const KeyQueueOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;       // a Report, a departure, or a new head
  std::set<uint64_t> waiting_;       // GUARDED_BY(mu_): tickets in order
  uint64_t next_seq_ = 0;            // GUARDED_BY(mu_)
  uint64_t releases_ = 0;            // GUARDED_BY(mu_): picks handed out, numbered
  std::vector<Lane> lanes_;          // GUARDED_BY(mu_): one per key of the ring
  std::vector<KeyRing::KeyState> states_;  // GUARDED_BY(mu_): the ring's, read by SyncLocked
  int generation_ = -1;              // GUARDED_BY(mu_): the ring's list the lanes belong to
  size_t rotation_ = 0;              // GUARDED_BY(mu_): the key to try first
  std::deque<double> accepted_;      // GUARDED_BY(mu_): recent accepted releases' times
  double last_cooldown_s_ = 1;       // GUARDED_BY(mu_): the last 429's cooldown
  std::mt19937 rng_;                 // GUARDED_BY(mu_)
};

}  // namespace hone::route
