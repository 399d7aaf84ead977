#include "route/attempt_loop.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "route/refusals.h"

namespace hone::route {
namespace {

using backend::Clock;
using Dur = std::chrono::duration<double>;

// What the loop does after a failed attempt.
enum class Next { kStop, kNextKey, kBackoff };

Next AfterFailure(RemoteBackend& up, const Error& e, const AttemptInfo& info, int attempt,
                  const RouteConfig& route) {
  if (e.code == ErrorCode::kAborted) return Next::kStop;  // the client left: nothing to retry for
  if (SameOnEveryTarget(e)) return Next::kStop;
  if (e.code == ErrorCode::kBusy && info.outcome == Outcome::kOk) return Next::kStop;  // at max_concurrent
  if (info.no_key) return Next::kStop;  // the queue's deadline passed, or every key is revoked
  // (Counting 429s as attempts made a storm give up seconds into it.)
  const bool key_fault = (info.outcome == Outcome::kAuth && !up.keys().AllRevoked()) ||
                         (info.outcome == Outcome::kRateLimited && !up.keys().empty());
  if (key_fault) return Next::kNextKey;
  if (!Retryable(info.outcome) || info.outcome == Outcome::kAuth || attempt == route.retry.max_attempts)
    return Next::kStop;
  return Next::kBackoff;
}

// Sleeps `wait` seconds in slices; false when the client left meanwhile.
bool Backoff(double wait, const backend::GenerationRequest& r) {
  const auto wake = Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(wait));
  while (Clock::now() < wake) {
    if (r.cancelled && r.cancelled()) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(wake - Clock::now(), std::chrono::milliseconds(50)));
  }
  return true;
}

Error BreakerOpen(RemoteBackend& up, const std::string& name) {
  Error e = MakeError(ErrorCode::kUnavailable, "upstream '" + name + "': circuit breaker open");
  e.retry_after_s = static_cast<int>(std::ceil(std::max(1.0, up.breaker().RetryAfter())));
  return e;
}

}  // namespace

AttemptsResult RunAttempts(RemoteBackend& up, const RouteConfig& route, const Target& target,
                           const backend::GenerationRequest& r, Clock::time_point deadline,
                           RouteMetrics& metrics, Jitter& jitter) {
  const std::string label = target.Label();
  auto count = [&](const char* series_name, const char* key, const std::string& value) {
    metrics.Add(series_name, Labels({{"route", route.name}, {"target", label}, {key, value}}));
  };
  AttemptsResult out;
  Error last{ErrorCode::kUpstream, "upstream '" + target.upstream + "' was not tried"};
  KeyQueue::Ticket ticket;  // the request's place in the upstream's key queue, kept across attempts
  for (int attempt = 1; attempt <= route.retry.max_attempts; ++attempt) {
    if (!up.breaker().Allow()) {
      count(series::kAttempts, "outcome", "breaker_open");
      out.completion = BreakerOpen(up, target.upstream);
      return out;
    }
    ++out.attempts;
    AttemptInfo info;
    auto c = up.StartAttempt(r, &info, deadline, &ticket);
    if (!info.key_fingerprint.empty())
      metrics.Add(series::kKeyRequests, Labels({{"upstream", target.upstream},
                                                {"key", info.key_fingerprint},
                                                {"outcome", OutcomeName(info.outcome)}}));
    if (c) {
      out.completion = std::move(c);
      return out;
    }
    last = c.error();
    if (last.code != ErrorCode::kAborted) count(series::kAttempts, "outcome", OutcomeName(info.outcome));
    const Next next = AfterFailure(up, last, info, attempt, route);
    if (next == Next::kStop) break;
    if (next == Next::kNextKey) {
      count(series::kRetries, "reason", "next_key");
      --attempt;
      if (info.outcome == Outcome::kAuth && out.attempts > 16) break;  // keys keep failing: stop
      continue;
    }
    double wait;
    {
      std::lock_guard<std::mutex> lock(jitter.mu);
      wait = BackoffSeconds(route.retry, attempt, last.retry_after_s, jitter.rng);
    }
    if (Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(wait)) > deadline) break;
    count(series::kRetries, "reason", OutcomeName(info.outcome));
    if (!Backoff(wait, r)) {
      last = MakeError(ErrorCode::kAborted, "the client left during a retry's backoff");
      break;
    }
  }
  out.completion = last;
  return out;
}

}  // namespace hone::route
