// A circuit breaker per upstream and per key. Closed: requests flow and
// failures are counted. Open (after `consecutive_failures` in a row, or a
// failure rate over `window_s` above `failure_rate` once `min_volume`
// requests were seen): nothing is sent until `cooldown_s` has passed. Then
// half-open: exactly one probe goes; its success closes the breaker, its
// failure opens it again for another cooldown.
#pragma once

#include <deque>
#include <functional>
#include <mutex>

namespace hone::route {

struct BreakerOptions {
  int consecutive_failures = 5;
  double failure_rate = 0.5;  // 0..1, over the window
  int min_volume = 20;        // requests in the window before the rate counts
  double window_s = 60;
  double cooldown_s = 30;
};

enum class BreakerState { kClosed, kOpen, kHalfOpen };
const char* BreakerStateName(BreakerState s);  // "closed", "open", "half_open"

class Breaker {
 public:
  using ClockFn = std::function<double()>;  // seconds, monotonic
  explicit Breaker(BreakerOptions o = {}, ClockFn clock = {});

  // Whether a request may be sent now. In half-open only the first caller
  // gets true (the probe) until that probe reports back.
  bool Allow();
  void Success();
  void Failure();
  BreakerState state();
  // Seconds until an open breaker lets a probe through (0 when not open).
  double RetryAfter();
  int opened_count();  // how often it opened, for metrics

 private:
  void Record(bool ok, double now);  // needs mu_
  void Open(double now);             // needs mu_
  void Advance(double now);          // needs mu_: open -> half-open after the cooldown

  const BreakerOptions o_;
  ClockFn clock_;
  std::mutex mu_;
  // GUARDED_BY(mu_): everything below.
  BreakerState state_ = BreakerState::kClosed;
  int consecutive_ = 0;
  double opened_at_ = 0;
  bool probe_out_ = false;
  double probe_at_ = 0;
  int opened_count_ = 0;
  std::deque<std::pair<double, bool>> window_;  // (time, ok) of recent outcomes
};

}  // namespace hone::route
