#include "route/retry.h"

#include <algorithm>
#include <cmath>

namespace hone::route {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kConnect:
      return "connect";
    case Outcome::kTimeout:
      return "timeout";
    case Outcome::kRateLimited:
      return "rate_limited";
    case Outcome::kAuth:
      return "auth";
    case Outcome::kServer:
      return "server_error";
    case Outcome::kClient:
      return "client_error";
    case Outcome::kBroken:
      return "broken_stream";
  }
  return "?";
}

Outcome ClassifyStatus(int s) {
  if (s >= 200 && s < 300) return Outcome::kOk;
  if (s == 429) return Outcome::kRateLimited;
  if (s == 401 || s == 403) return Outcome::kAuth;
  if (s == 408) return Outcome::kTimeout;
  if (s >= 500) return Outcome::kServer;
  if (s == 0) return Outcome::kConnect;
  if (s >= 400) return Outcome::kClient;
  // 1xx or 3xx (a redirect: a base_url that moved): the upstream is
  // misconfigured, not the client's request, so it is not passed on as a 4xx.
  return Outcome::kServer;
}

bool Retryable(Outcome o) {
  switch (o) {
    case Outcome::kConnect:
    case Outcome::kTimeout:
    case Outcome::kRateLimited:
    case Outcome::kServer:
    case Outcome::kBroken:
    case Outcome::kAuth:  // on the next key
      return true;
    case Outcome::kOk:
    case Outcome::kClient:
      return false;
  }
  return false;
}

bool UpstreamFault(Outcome o) {
  return o == Outcome::kConnect || o == Outcome::kTimeout || o == Outcome::kServer || o == Outcome::kBroken;
}

double BackoffSeconds(const RetryPolicy& p, int retry, double retry_after_s, std::mt19937& rng) {
  const double cap = std::min(p.max_backoff_s, p.base_backoff_s * std::pow(2.0, std::max(0, retry - 1)));
  std::uniform_real_distribution<double> jitter(0, std::max(0.0, cap));
  return std::max(jitter(rng), std::max(0.0, retry_after_s));
}

}  // namespace hone::route
