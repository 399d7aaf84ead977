#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace hone::serve {
std::string MetricNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string FamilyHeader(const std::string& name, const char* type, const std::string& help) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string EscapeLabel(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

namespace {

std::string Num(double v) { return MetricNumber(v); }

std::string Label(const std::string& model) { return "model_name=\"" + EscapeLabel(model) + "\""; }

// Latency buckets: 1 ms .. 2 min, roughly the spread vLLM uses.
std::vector<double> LatencyBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75,  1,     2.5,  5,    7.5,  10,   20,   40,  80,   120};
}

// What each family means, and whether vLLM has the same series (so that
// --metrics-compat vllm writes it again as vllm:<name without hone_>).
struct FamilyInfo {
  const char* name;
  const char* help;
  bool vllm;
};
constexpr FamilyInfo kFamilies[] = {
    {metric::kTtft, "Time to first token of local requests, seconds", true},
    {metric::kItl, "Time between consecutive output tokens, seconds", true},
    {metric::kE2e, "End-to-end latency of local requests, seconds", true},
    {metric::kQueue, "Time a request waited for a slot, seconds", true},
    {metric::kPromptTokens, "Prompt tokens processed", true},
    {metric::kGenTokens, "Tokens generated", true},
    {metric::kRequestSuccess, "Requests that finished", true},
    {metric::kRunning, "Requests being decoded now", true},
    {metric::kWaiting, "Requests waiting for a slot", true},
    {metric::kKvUsage, "Share of KV cache cells in use over all slots, 0 to 1", true},
    {metric::kPrefixQueries, "Prompt tokens looked up in the prefix cache", true},
    {metric::kPrefixHits, "Prompt tokens found in the prefix cache", true},
    {metric::kCacheConfig, "KV cache geometry: block_size tokens per cell, num_gpu_blocks cells over all slots (the protocol's name)", true},
    {metric::kSlotWait, "Forecast wait for a slot of a request arriving now, seconds", false},
    {metric::kPrefillRate, "Measured prompt tokens prefilled per second", false},
    {metric::kLoads, "Models loaded", false},
    {metric::kLoadFailures, "Model loads that failed", false},
    {metric::kUnloads, "Models unloaded", false},
    {metric::kLoadSeconds, "Model load duration, seconds", false},
    {metric::kUnloadSeconds, "Model unload duration, seconds", false},
    {metric::kRejected, "Requests refused before they ran (busy, too long, unknown model)", false},
    {metric::kDecodeRetries, "Batched decodes that failed and were retried one sequence at a time", false},
    {metric::kSpecDrafted, "Draft tokens decoded for speculative decoding (--spec)", false},
    {metric::kSpecAccepted, "Draft tokens the target model kept (each one a decode step saved)", false},
    {"hone_prompt_cache_misses_total", "Admitted prompts for which neither a slot nor the prompt cache held a useful prefix", false},
    {"hone_prompt_cache_ram_hits_total", "Prompts whose prefix was restored from the RAM tier of the prompt cache", false},
    {"hone_prompt_cache_disk_hits_total", "Prompts whose prefix was restored from the disk tier of the prompt cache", false},
    {"hone_prompt_cache_ram_restored_tokens_total", "Tokens restored from the RAM tier", false},
    {"hone_prompt_cache_disk_restored_tokens_total", "Tokens restored from the disk tier", false},
    {"hone_prompt_cache_ram_restore_seconds", "Time to restore one entry from the RAM tier into a slot, seconds", false},
    {"hone_prompt_cache_disk_restore_seconds", "Time to read, verify and restore one entry from the disk tier, seconds", false},
    {"hone_prompt_cache_ram_bytes", "Bytes of KV state held in the RAM tier", false},
    {"hone_prompt_cache_disk_bytes", "Bytes of KV state held in the disk tier", false},
    {"hone_prompt_cache_ram_evictions_total", "Entries that left the RAM tier (to disk, or dropped)", false},
    {"hone_prompt_cache_disk_evictions_total", "Entries deleted from the disk tier to stay within its budget", false},
    {"hone_prompt_cache_disk_damaged_total", "Disk entries found damaged when read (treated as misses and deleted)", false},
    {"hone_prompt_cache_disk_writes_skipped_total", "Entries kept in RAM only because too many bytes already waited for the disk", false},
    {"hone_prompt_cache_disk_write_errors_total", "Entries that could not be written to the disk tier (full disk, unwritable folder)", false},
};

const FamilyInfo* Find(const std::string& name) {
  for (const FamilyInfo& f : kFamilies)
    if (name == f.name) return &f;
  return nullptr;
}

// hone_num_requests_waiting -> vllm:num_requests_waiting
std::string VllmName(const std::string& name) { return "vllm:" + name.substr(std::string("hone_").size()); }

}  // namespace

void Histogram::Observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    *out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  *out += name + "_sum{" + labels + "} " + Num(sum_) + "\n";
  *out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

double Histogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  uint64_t target = static_cast<uint64_t>(q * count_ + 0.5), cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    if (cum >= target) return bounds_[i];
  }
  return bounds_.empty() ? 0 : bounds_.back();
}

void Metrics::Add(const std::string& name, const std::string& model, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name][model] += v;
}

void Metrics::Set(const std::string& name, const std::string& model, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  gauges_[name][model] = v;
}

void Metrics::Observe(const std::string& name, const std::string& model, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& per_model = hists_[name];
  auto it = per_model.find(model);
  if (it == per_model.end()) it = per_model.emplace(model, Histogram(LatencyBuckets())).first;
  it->second.Observe(seconds);
}

double Metrics::Get(const std::string& name, const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto* m : {&counters_, &gauges_}) {
    auto it = m->find(name);
    if (it == m->end()) continue;
    auto jt = it->second.find(model);
    if (jt != it->second.end()) return jt->second;
  }
  return 0;
}

void Metrics::SetInfo(const std::string& name, const std::string& model, std::map<std::string, std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  if (labels.empty()) {
    infos_[name].erase(model);
  } else {
    infos_[name][model] = std::move(labels);
  }
}

// Writes every family, or with only_vllm the ones vLLM has, under their vllm:
// names. The caller holds mu_.
void Metrics::RenderFamilies(bool only_vllm, std::string* out) const {
  auto header = [&](const std::string& name, const char* type, std::string* named) {
    const FamilyInfo* f = Find(name);
    if (only_vllm && (!f || !f->vllm)) return false;
    *named = only_vllm ? VllmName(name) : name;
    *out += FamilyHeader(*named, type, f ? f->help : name);
    return true;
  };
  std::string n;
  for (const auto& [name, per_model] : counters_) {
    if (!header(name, "counter", &n)) continue;
    for (const auto& [model, v] : per_model) *out += n + "{" + Label(model) + "} " + Num(v) + "\n";
  }
  for (const auto& [name, per_model] : gauges_) {
    if (!header(name, "gauge", &n)) continue;
    for (const auto& [model, v] : per_model) *out += n + "{" + Label(model) + "} " + Num(v) + "\n";
    // vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc; pickers read either.
    if (only_vllm && name == metric::kKvUsage) {
      *out += FamilyHeader("vllm:gpu_cache_usage_perc", "gauge", Find(name)->help);
      for (const auto& [model, v] : per_model)
        *out += "vllm:gpu_cache_usage_perc{" + Label(model) + "} " + Num(v) + "\n";
    }
  }
  for (const auto& [name, per_model] : infos_) {
    if (per_model.empty() || !header(name, "gauge", &n)) continue;
    for (const auto& [model, labels] : per_model) {
      std::string l = Label(model);
      for (const auto& [k, v] : labels) l += "," + k + "=\"" + EscapeLabel(v) + "\"";
      *out += n + "{" + l + "} 1\n";
    }
  }
  for (const auto& [name, per_model] : hists_) {
    if (!header(name, "histogram", &n)) continue;
    for (const auto& [model, h] : per_model) h.Render(n, Label(model), out);
  }
}

std::string Metrics::Render(bool vllm_compat) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  RenderFamilies(false, &out);
  if (vllm_compat) RenderFamilies(true, &out);
  return out;
}

}  // namespace hone::serve
