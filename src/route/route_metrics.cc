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

}  // namespace

std::string Labels(std::initializer_list<std::pair<const char*, std::string>> kv) {
  std::string out;
  for (const auto& [k, v] : kv) {
    if (!out.empty()) out += ',';
    out += k;
    out += "=\"";
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      out += c == '\n' ? ' ' : c;
    }
    out += '"';
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
    *out += "# TYPE " + name + " counter\n";
    for (const auto& [labels, v] : series) *out += name + "{" + labels + "} " + Num(v) + "\n";
  }
  for (const auto& [name, series] : histograms_) {
    *out += "# TYPE " + name + " histogram\n";
    for (const auto& [labels, h] : series) h.Render(name, labels, out);
  }
}

}  // namespace hone::route
