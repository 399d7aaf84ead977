// The router's Prometheus series, labelled by route, target, key fingerprint,
// outcome and reason (serve::Metrics labels by model only). Thread-safe.
// Gauges that mirror live state (breaker state, in-flight requests) are not
// stored here: the router renders them from that state at scrape time.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "serve/metrics.h"
#include "util/result.h"

namespace hone::route {

namespace series {
inline constexpr const char* kRequests = "hone_route_requests_total";                // route, target, outcome
inline constexpr const char* kAttempts = "hone_route_attempts_total";                // route, target, outcome
inline constexpr const char* kRetries = "hone_route_retries_total";                  // route, target, reason
inline constexpr const char* kOverflow = "hone_route_overflow_total";                // route, reason
inline constexpr const char* kRecoveries = "hone_route_midstream_recoveries_total";  // route, from, to
inline constexpr const char* kStreamFailures = "hone_route_midstream_failures_total";  // route, target
inline constexpr const char* kKeyRequests = "hone_route_key_requests_total";    // upstream, key, outcome
inline constexpr const char* kTtft = "hone_route_time_to_first_token_seconds";  // route, target
inline constexpr const char* kLatency = "hone_route_request_latency_seconds";   // route, target
// Predicted minus actual time to first token of local requests, seconds.
inline constexpr const char* kTtftError = "hone_route_ttft_prediction_error_seconds";  // route
inline constexpr const char* kCache = "hone_cache_requests_total";  // route, result (hit, miss)
}  // namespace series

// {"route", "support"}, {"target", "local:qwen"} -> route="support",target="local:qwen"
std::string Labels(std::initializer_list<std::pair<const char*, std::string>> kv);
// An error code as a label value: "upstream failure" -> "upstream_failure".
std::string CodeLabel(ErrorCode c);

class RouteMetrics {
 public:
  void Add(const char* name, const std::string& labels, double v = 1);
  void Observe(const char* name, const std::string& labels, double v);
  double Get(const char* name, const std::string& labels) const;
  // Appends the series in Prometheus text format.
  void Render(std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, double>> counters_;              // GUARDED_BY(mu_)
  std::map<std::string, std::map<std::string, serve::Histogram>> histograms_;  // GUARDED_BY(mu_)
};

}  // namespace hone::route
