// One upstream target's attempts at a request: the circuit breaker asked
// first, then attempts with exponential backoff and full jitter up to the
// route's max_attempts within its deadline; a bad (401/403) or rate-limited
// (429) key is not the upstream's failure and costs no attempt: the request
// goes back to its place in the upstream's key queue for the next usable key.
// A client that leaves during a backoff ends the loop.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <random>

#include "backend/backend.h"
#include "route/config.h"
#include "route/remote_backend.h"
#include "route/route_metrics.h"

namespace hone::route {

// The jitter's random source, shared by every request (draws hold its lock).
struct Jitter {
  std::mutex mu;
  std::mt19937 rng{std::random_device{}()};  // GUARDED_BY(mu)
};

struct AttemptsResult {
  Result<std::unique_ptr<backend::Completion>> completion = MakeError(ErrorCode::kInternal, "not tried");
  int attempts = 0;  // requests sent (key changes not counted)
};

// Counts each attempt, retry and key use in `metrics` under the route's and
// target's labels.
AttemptsResult RunAttempts(RemoteBackend& up, const RouteConfig& route, const Target& target,
                           const backend::GenerationRequest& r, backend::Clock::time_point deadline,
                           RouteMetrics& metrics, Jitter& jitter);

}  // namespace hone::route
