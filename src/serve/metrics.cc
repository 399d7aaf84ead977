#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace hone::serve {
std::string MetricNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace {

std::string Num(double v) { return MetricNumber(v); }

std::string Label(const std::string& model) {
  std::string escaped;
  for (char c : model) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return "model_name=\"" + escaped + "\"";
}

// Latency buckets: 1 ms .. 2 min, roughly the spread vLLM uses.
std::vector<double> LatencyBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75,  1,     2.5,  5,    7.5,  10,   20,   40,  80,   120};
}

const char* Help(const std::string& name) {
  if (name == metric::kTtft) return "Time to first token";
  if (name == metric::kItl) return "Time between consecutive output tokens";
  if (name == metric::kE2e) return "End-to-end request latency";
  if (name == metric::kQueue) return "Time a request waited for a slot";
  if (name == metric::kLoadSeconds) return "Model load duration";
  if (name == metric::kUnloadSeconds) return "Model unload duration";
  return "";
}

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

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, per_model] : counters_) {
    out += "# TYPE " + name + " counter\n";
    for (const auto& [model, v] : per_model) out += name + "{" + Label(model) + "} " + Num(v) + "\n";
  }
  for (const auto& [name, per_model] : gauges_) {
    out += "# TYPE " + name + " gauge\n";
    for (const auto& [model, v] : per_model) out += name + "{" + Label(model) + "} " + Num(v) + "\n";
  }
  for (const auto& [name, per_model] : hists_) {
    if (*Help(name)) out += "# HELP " + name + " " + Help(name) + "\n";
    out += "# TYPE " + name + " histogram\n";
    for (const auto& [model, h] : per_model) h.Render(name, Label(model), &out);
  }
  return out;
}

}  // namespace hone::serve
