#include "route/route_metrics.h"

#include <cstdio>

namespace hone::route {
namespace {

std::string Num(double v) { return serve::MetricNumber(v); }

std::vector<double> Bounds(const std::string& name) {
  if (name == series::kTtftError)  // signed: early (< 0) and late (> 0) predictions
    return {-10, -5, -2, -1, -0.5, -0.25, -0.1, -0.05, 0, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10};
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 40, 80, 160};
}

const char* Help(const std::string& name) {
  if (name == series::kRequests) return "Routed requests (one each) by route, the target that served them and outcome";
  if (name == series::kAttempts) return "Attempts at a target that failed, by route, target and cause";
  if (name == series::kRetries) return "Retries of an upstream attempt, by reason";
  if (name == series::kOverflow) return "Requests sent past the local engine, by reason";
  if (name == series::kRecoveries) return "Broken streams continued on another target";
  if (name == series::kStreamFailures) return "Streams that broke after their first byte";
  if (name == series::kKeyRequests) return "Upstream requests by API key fingerprint and outcome";
  if (name == series::kTtft) return "Time to first token of routed requests, seconds";
  if (name == series::kLatency) return "Latency of routed requests, seconds";
  if (name == series::kTtftError) return "Predicted minus actual time to first token of local requests, seconds";
  if (name == series::kCache) return "Response cache lookups by result";
  return "hone router series";
}

}  // namespace

std::string Labels(std::initializer_list<std::pair<const char*, std::string>> kv) {
  std::string out;
  for (const auto& [k, v] : kv) {
    if (!out.empty()) out += ',';
    out += k;
    out += "=\"" + serve::EscapeLabel(v) + '"';
  }
  return out;
}

std::string CodeLabel(ErrorCode c) {
  std::string s = ErrorCodeName(c);
  for (char& ch : s) ch = ch == ' ' ? '_' : ch;
  return s;
}

void RouteMetrics::Add(const char* name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name][labels] += v;
}

void RouteMetrics::Observe(const char* name, const std::string& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& per = histograms_[name];
  auto it = per.find(labels);
  if (it == per.end()) it = per.emplace(labels, serve::Histogram(Bounds(name))).first;
  it->second.Observe(v);
}

double RouteMetrics::Get(const char* name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto n = counters_.find(name);
  if (n == counters_.end()) return 0;
  auto l = n->second.find(labels);
  return l == n->second.end() ? 0 : l->second;
}

void RouteMetrics::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, series] : counters_) {
    *out += serve::FamilyHeader(name, "counter", Help(name));
    for (const auto& [labels, v] : series) *out += name + "{" + labels + "} " + Num(v) + "\n";
  }
  for (const auto& [name, series] : histograms_) {
    *out += serve::FamilyHeader(name, "histogram", Help(name));
    for (const auto& [labels, h] : series) h.Render(name, labels, out);
  }
}

}  // namespace hone::route
