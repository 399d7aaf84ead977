#include "route/breaker.h"

#include <chrono>

namespace hone::route {

const char* BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "?";
}

Breaker::Breaker(BreakerOptions o, ClockFn clock) : o_(o), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
}

void Breaker::Advance(double now) {
  if (state_ == BreakerState::kOpen && now - opened_at_ >= o_.cooldown_s) {
    state_ = BreakerState::kHalfOpen;
    probe_out_ = false;
  }
}

void Breaker::Open(double now) {
  state_ = BreakerState::kOpen;
  opened_at_ = now;
  probe_out_ = false;
  consecutive_ = 0;
  window_.clear();
  ++opened_count_;
}

bool Breaker::Allow() {
  std::lock_guard<std::mutex> lock(mu_);
  Advance(clock_());
  switch (state_) {
    case BreakerState::kClosed:
      return true;
    case BreakerState::kOpen:
      return false;
    case BreakerState::kHalfOpen: {
      // A probe that never reported (its client left) must not hold the
      // breaker half-open forever: after another cooldown a new probe goes.
      const double now = clock_();
      if (probe_out_ && now - probe_at_ < o_.cooldown_s) return false;
      probe_out_ = true;
      probe_at_ = now;
      return true;
    }
  }
  return false;
}

void Breaker::Record(bool ok, double now) {
  window_.emplace_back(now, ok);
  while (!window_.empty() && now - window_.front().first > o_.window_s) window_.pop_front();
}

void Breaker::Success() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  Advance(now);
  consecutive_ = 0;
  if (state_ == BreakerState::kHalfOpen) {
    state_ = BreakerState::kClosed;
    window_.clear();
  }
  Record(true, now);
}

void Breaker::Failure() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  Advance(now);
  if (state_ == BreakerState::kHalfOpen) {
    Open(now);  // the probe failed
    return;
  }
  if (state_ == BreakerState::kOpen) return;  // a late report from before it opened
  ++consecutive_;
  Record(false, now);
  int failures = 0;
  for (const auto& [t, ok] : window_) failures += !ok;
  const bool rate_tripped = static_cast<int>(window_.size()) >= o_.min_volume &&
                            failures > o_.failure_rate * static_cast<double>(window_.size());
  if (consecutive_ >= o_.consecutive_failures || rate_tripped) Open(now);
}

BreakerState Breaker::state() {
  std::lock_guard<std::mutex> lock(mu_);
  Advance(clock_());
  return state_;
}

double Breaker::RetryAfter() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_();
  Advance(now);
  return state_ == BreakerState::kOpen ? o_.cooldown_s - (now - opened_at_) : 0;
}

int Breaker::opened_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_count_;
}

}  // namespace hone::route
