// What one attempt at an upstream ended with, and what the router does next:
// retry (with exponential backoff and full jitter, Retry-After honoured),
// move to the next key, or give up on this target. Pure policy, no I/O.
#pragma once

#include <random>

namespace hone::route {

enum class Outcome {
  kOk,
  kConnect,      // could not connect (refused, DNS, TLS)
  kTimeout,      // connect, first byte, idle or total timeout
  kRateLimited,  // 429
  kAuth,         // 401, 403: this key is bad
  kServer,       // 500, 502, 503, 504
  kClient,       // 400, 404, 413, 422 and other 4xx: the request itself is wrong
  kBroken,       // the stream ended without its end marker
};
const char* OutcomeName(Outcome o);  // "ok", "connect", "timeout", ...

// From an HTTP status (0 = no response; see the transport error instead).
Outcome ClassifyStatus(int http_status);
// Connect errors, timeouts, 429 and 5xx are worth another try; 4xx never.
bool Retryable(Outcome o);
// Whether the outcome says the upstream (not the key, not the request) is
// failing: what its circuit breaker counts.
bool UpstreamFault(Outcome o);

struct RetryPolicy {
  int max_attempts = 3;  // per target, including the first
  double base_backoff_s = 0.1;
  double max_backoff_s = 2.0;
  double deadline_s = 60;  // for the whole request across targets
};

// Seconds to wait before retry number `retry` (1 = the first retry): uniform
// in [0, min(max, base * 2^(retry-1))] (full jitter), but never less than the
// upstream's Retry-After.
double BackoffSeconds(const RetryPolicy& p, int retry, double retry_after_s, std::mt19937& rng);

}  // namespace hone::route
