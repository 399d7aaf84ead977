// Prometheus text exposition with vLLM-style names (hone: prefix instead of
// vllm:), labelled by model. Thread-safe: scheduler threads and HTTP threads
// record into one Metrics owned by the server.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hone::serve {

// A sample value as the Prometheus text format writes it ("%.9g").
std::string MetricNumber(double v);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double v);
  // Appends the _bucket/_sum/_count lines for one label set.
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const { return count_; }
  double Quantile(double q) const;  // from buckets (upper bound), for logs and tests

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  // Counters (monotonic) and gauges (set) by name and model.
  void Add(const std::string& name, const std::string& model, double v = 1);
  void Set(const std::string& name, const std::string& model, double v);
  void Observe(const std::string& name, const std::string& model, double seconds);
  double Get(const std::string& name, const std::string& model) const;  // counter or gauge, 0 if absent
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, double>> counters_, gauges_;
  std::map<std::string, std::map<std::string, Histogram>> hists_;
};

// Metric names used across the server (declared once so they cannot drift).
namespace metric {
inline constexpr const char* kTtft = "hone:time_to_first_token_seconds";
inline constexpr const char* kItl = "hone:inter_token_latency_seconds";
inline constexpr const char* kE2e = "hone:e2e_request_latency_seconds";
inline constexpr const char* kQueue = "hone:request_queue_time_seconds";
inline constexpr const char* kPromptTokens = "hone:prompt_tokens_total";
inline constexpr const char* kGenTokens = "hone:generation_tokens_total";
inline constexpr const char* kRequestSuccess = "hone:request_success_total";
inline constexpr const char* kRunning = "hone:num_requests_running";
inline constexpr const char* kWaiting = "hone:num_requests_waiting";
inline constexpr const char* kKvUsage = "hone:kv_cache_usage_perc";
inline constexpr const char* kPrefixQueries = "hone:prefix_cache_queries_total";
inline constexpr const char* kPrefixHits = "hone:prefix_cache_hits_total";
inline constexpr const char* kLoads = "hone:model_loads_total";
inline constexpr const char* kLoadFailures = "hone:model_load_failures_total";
inline constexpr const char* kUnloads = "hone:model_unloads_total";
inline constexpr const char* kLoadSeconds = "hone:model_load_duration_seconds";
inline constexpr const char* kUnloadSeconds = "hone:model_unload_duration_seconds";
inline constexpr const char* kRejected = "hone:requests_rejected_total";
}  // namespace metric

}  // namespace hone::serve
