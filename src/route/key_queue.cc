#include "route/key_queue.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace hone::route {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Accepted releases older than this no longer say how fast the upstream
// takes requests now.
constexpr double kRateWindowS = 10;
constexpr size_t kRateSamples = 256;
// A waiter wakes at least this often to see whether its client left.
constexpr auto kCancelPoll = std::chrono::milliseconds(100);

}  // namespace

KeyQueue::KeyQueue(KeyRing& ring, KeyQueueOptions options, uint32_t seed)
    : ring_(ring), options_(options), rng_(seed) {}

double KeyQueue::JitterLocked(double lo, double hi) {
  if (!(hi > lo)) return lo;
  return std::uniform_real_distribution<double>(lo, hi)(rng_);
}

void KeyQueue::SyncLocked() {
  const int generation = ring_.States(&states_);
  if (generation != generation_ || lanes_.size() != states_.size()) {
    // A reload: a new list with every key usable; the old list's picks
    // report into nothing.
    generation_ = generation;
    lanes_.assign(states_.size(), Lane{});
  }
}

double KeyQueue::ReleasableAtLocked(size_t k, double now) {
  const KeyRing::KeyState& s = states_[k];
  const Lane& l = lanes_[k];
  if (s.revoked) return kInf;
  // Paced and its window full: the next release waits for a status.
  if (l.window > 0 && l.pending >= l.window) return kInf;
  double at = std::max(now, l.window > 0 ? l.not_before : 0.0);
  if (s.cool_until > 0) at = std::max(at, s.cool_until + l.cool_jitter);
  return at;
}

std::optional<KeyRing::Pick> KeyQueue::TakeLocked(double now) {
  const size_t n = lanes_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (rotation_ + i) % n;
    if (ReleasableAtLocked(k, now) > now) continue;
    // The ring may have cooled it since SyncLocked (a 429 on another thread).
    auto pick = ring_.Take(k, generation_);
    if (!pick) continue;
    pick->release = ++releases_;
    Lane& l = lanes_[k];
    ++l.pending;
    if (l.window > 0) l.not_before = now + JitterLocked(options_.gap_s, 2 * options_.gap_s);
    rotation_ = (k + 1) % n;
    return pick;
  }
  return std::nullopt;
}

std::optional<KeyRing::Pick> KeyQueue::TryTake(Ticket* ticket, double now, double* wake_at) {
  std::lock_guard<std::mutex> lock(mu_);
  return TryTakeLocked(ticket, now, wake_at);
}

std::optional<KeyRing::Pick> KeyQueue::TryTakeLocked(Ticket* ticket, double now, double* wake_at) {
  *wake_at = kInf;
  SyncLocked();
  // No keys at all: an upstream without authentication has nothing to queue for.
  if (lanes_.empty()) return KeyRing::Pick{0, "", "", generation_};
  if (!ticket->seq) ticket->seq = ++next_seq_;
  waiting_.insert(ticket->seq);
  if (*waiting_.begin() != ticket->seq) return std::nullopt;
  if (auto pick = TakeLocked(now)) {
    waiting_.erase(ticket->seq);
    cv_.notify_all();  // a new head
    return pick;
  }
  for (size_t k = 0; k < lanes_.size(); ++k) *wake_at = std::min(*wake_at, ReleasableAtLocked(k, now));
  return std::nullopt;
}

int KeyQueue::Leave(const Ticket& ticket, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  return LeaveLocked(ticket, now);
}

int KeyQueue::LeaveLocked(const Ticket& ticket, double now) {
  const int retry_after = RetryAfterLocked(ticket.seq, now);
  if (waiting_.erase(ticket.seq)) cv_.notify_all();
  return retry_after;
}

double KeyQueue::SoonestLocked(double now) {
  double soonest = kInf;
  for (size_t k = 0; k < lanes_.size(); ++k) {
    if (states_[k].revoked) continue;
    const double cooled = states_[k].cool_until > 0 ? states_[k].cool_until + lanes_[k].cool_jitter : 0;
    soonest = std::min(soonest, std::max(now, cooled));
  }
  return soonest;
}

int KeyQueue::RetryAfterLocked(uint64_t seq, double now) {
  SyncLocked();
  const auto ahead = static_cast<double>(std::distance(waiting_.begin(), waiting_.lower_bound(seq)));
  double next = kInf;
  size_t usable = 0;
  for (size_t k = 0; k < lanes_.size(); ++k) {
    next = std::min(next, ReleasableAtLocked(k, now));
    if (!states_[k].revoked) ++usable;
  }
  // Every lane waits for a status: one comes back about a gap from now.
  if (next == kInf) next = now + options_.gap_s;
  while (!accepted_.empty() && accepted_.front() < now - kRateWindowS) accepted_.pop_front();
  // The measured time between accepted releases; before two were seen,
  // each key is taken to serve one request per cooldown.
  const double interval = accepted_.size() >= 2
                              ? (accepted_.back() - accepted_.front()) / double(accepted_.size() - 1)
                              : last_cooldown_s_ / double(std::max<size_t>(usable, 1));
  const double wait = (next - now) + ahead * interval;
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 3600.0));
}

Result<KeyRing::Pick> KeyQueue::Acquire(Ticket* ticket, std::chrono::steady_clock::time_point deadline,
                                        const std::function<bool()>& cancelled) {
  using Steady = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    double wake_at = kInf;
    const double now = ring_.Now();
    if (auto pick = TryTakeLocked(ticket, now, &wake_at)) return *pick;
    if (ring_.AllRevoked()) {
      LeaveLocked(*ticket, now);
      return MakeError(ErrorCode::kUnavailable, "every API key was rejected");
    }
    const auto steady_now = Steady::now();
    // No key is off its cooldown before the deadline: waiting cannot help,
    // and the route's next target should have the time that is left.
    const double left_s = std::chrono::duration<double>(deadline - steady_now).count();
    if (steady_now >= deadline || SoonestLocked(now) - now > left_s) {
      const size_t behind = waiting_.size() - 1;
      Error e = MakeError(ErrorCode::kRateLimited,
                          "every API key is cooling down; waited for one until the route's deadline (" +
                              std::to_string(behind) + " more requests waiting)");
      e.retry_after_s = LeaveLocked(*ticket, now);
      return e;
    }
    if (cancelled && cancelled()) {
      LeaveLocked(*ticket, now);
      return MakeError(ErrorCode::kAborted, "the client left while waiting for an API key");
    }
    auto until = std::min(deadline, steady_now + kCancelPoll);
    if (wake_at < kInf)
      until = std::min(until, steady_now + std::chrono::duration_cast<Steady::duration>(
                                               std::chrono::duration<double>(std::max(0.0, wake_at - now))));
    cv_.wait_until(lock, until);
  }
}

void KeyQueue::Report(const KeyRing::Pick& pick, Verdict verdict) {
  std::lock_guard<std::mutex> lock(mu_);
  SyncLocked();
  if (pick.generation != generation_ || pick.index >= lanes_.size()) return;
  Lane& l = lanes_[pick.index];
  l.pending = std::max(0, l.pending - 1);
  const double now = ring_.Now();
  switch (verdict) {
    case Verdict::kAccepted:
      accepted_.push_back(now);
      if (accepted_.size() > kRateSamples) accepted_.pop_front();
      // Slow start: one more release may await its status at once. An
      // answer to a request sent before the last 429 says nothing of now.
      if (l.window > 0 && pick.release > l.paced_since && ++l.window >= options_.open_window) l.window = 0;
      break;
    case Verdict::kRateLimited:
      // The ring was told first (it holds the cooldown): pace this key from
      // one release again, starting a jittered moment after the cooldown.
      l.window = 1;
      l.paced_since = releases_;
      l.cool_jitter = JitterLocked(0, options_.gap_s);
      if (states_[pick.index].cool_until > now) last_cooldown_s_ = states_[pick.index].cool_until - now;
      break;
    case Verdict::kOther:
    case Verdict::kNotSent:
      break;
  }
  cv_.notify_all();
}

size_t KeyQueue::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

KeyQueue::View KeyQueue::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  View v;
  v.waiting = waiting_.size();
  v.retry_after_s = RetryAfterLocked(next_seq_ + 1, ring_.Now());
  return v;
}

}  // namespace hone::route
