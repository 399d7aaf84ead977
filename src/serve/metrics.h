// Prometheus text exposition, labelled by model (model_name, as vLLM does).
// Names follow vLLM's with a hone_ prefix (Prometheus reserves ':' for
// recording rules, and promtool rejects it); with vLLM compatibility on,
// the series an endpoint picker reads are written a second time under their
// vllm: names. Thread-safe: scheduler threads and HTTP threads record into
// one Metrics owned by the server.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hone::serve {

// A sample value as the Prometheus text format writes it ("%.9g").
std::string MetricNumber(double v);
// "# HELP name help\n# TYPE name type\n": every family starts with both.
std::string FamilyHeader(const std::string& name, const char* type, const std::string& help);
// A label value escaped for the text format (\\ and \"; a newline becomes a space).
std::string EscapeLabel(const std::string& value);

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
  // An info gauge (value 1) whose labels carry facts, e.g. the KV cache's
  // geometry; setting it again replaces the model's labels, and empty
  // labels remove the model's series (it was unloaded).
  void SetInfo(const std::string& name, const std::string& model, std::map<std::string, std::string> labels);
  double Get(const std::string& name, const std::string& model) const;  // counter or gauge, 0 if absent
  // vllm_compat: also write the series vLLM has under vllm: names.
  std::string Render(bool vllm_compat = false) const;

 private:
  void RenderFamilies(bool only_vllm, std::string* out) const;

  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, double>> counters_, gauges_;  // GUARDED_BY(mu_)
  std::map<std::string, std::map<std::string, Histogram>> hists_;           // GUARDED_BY(mu_)
  std::map<std::string, std::map<std::string, std::map<std::string, std::string>>> infos_;  // GUARDED_BY(mu_)
};

// Metric names used across the server (declared once so they cannot drift).
namespace metric {
inline constexpr const char* kTtft = "hone_time_to_first_token_seconds";
inline constexpr const char* kItl = "hone_inter_token_latency_seconds";
inline constexpr const char* kE2e = "hone_e2e_request_latency_seconds";
inline constexpr const char* kQueue = "hone_request_queue_time_seconds";
inline constexpr const char* kPromptTokens = "hone_prompt_tokens_total";
inline constexpr const char* kGenTokens = "hone_generation_tokens_total";
inline constexpr const char* kRequestSuccess = "hone_request_success_total";
inline constexpr const char* kRunning = "hone_num_requests_running";
inline constexpr const char* kWaiting = "hone_num_requests_waiting";
inline constexpr const char* kKvUsage = "hone_kv_cache_usage_perc";
inline constexpr const char* kPrefixQueries = "hone_prefix_cache_queries_total";
inline constexpr const char* kPrefixHits = "hone_prefix_cache_hits_total";
inline constexpr const char* kLoads = "hone_model_loads_total";
inline constexpr const char* kLoadFailures = "hone_model_load_failures_total";
inline constexpr const char* kUnloads = "hone_model_unloads_total";
inline constexpr const char* kLoadSeconds = "hone_model_load_duration_seconds";
inline constexpr const char* kUnloadSeconds = "hone_model_unload_duration_seconds";
inline constexpr const char* kRejected = "hone_requests_rejected_total";
// Steps whose batched decode failed and were retried one sequence at a time.
inline constexpr const char* kDecodeRetries = "hone_decode_retries_total";
// Speculative decoding (--spec): tokens drafted, and those the target kept.
inline constexpr const char* kSpecDrafted = "hone_spec_draft_tokens_total";
inline constexpr const char* kSpecAccepted = "hone_spec_accepted_tokens_total";
// Info: block_size (tokens per KV cell: 1 in llama.cpp), num_gpu_blocks
// (cells over all slots: the model-server protocol's label name, GPU or
// not), slots.
inline constexpr const char* kCacheConfig = "hone_cache_config_info";
// The scheduler's forecast for a request arriving now: its wait for a slot,
// and the measured prefill rate (a router over replicas reads both).
inline constexpr const char* kSlotWait = "hone_slot_wait_seconds";
inline constexpr const char* kPrefillRate = "hone_prefill_tokens_per_second";
}  // namespace metric

}  // namespace hone::serve
