#include "route/replica_load.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace hone::route {
namespace {

// name{labels} value -> name, the labels' text, value. False for comments
// and malformed lines.
bool SplitSample(const std::string& line, std::string* name, std::string* labels, double* value) {
  if (line.empty() || line[0] == '#') return false;
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (space == std::string::npos) return false;
  if (brace != std::string::npos && brace < space) {
    const size_t close = line.rfind('}', space);
    if (close == std::string::npos || close < brace) return false;
    *name = line.substr(0, brace);
    *labels = line.substr(brace + 1, close - brace - 1);
  } else {
    *name = line.substr(0, space);
    labels->clear();
  }
  char* end = nullptr;
  const std::string v = line.substr(space + 1);
  *value = std::strtod(v.c_str(), &end);
  return end && end != v.c_str();
}

// The value of label `key` in `labels` (escapes kept as written: model names
// with quotes are not worth a full parser here).
std::string Label(const std::string& labels, const std::string& key) {
  const std::string needle = key + "=\"";
  size_t at = 0;
  while ((at = labels.find(needle, at)) != std::string::npos) {
    if (at == 0 || labels[at - 1] == ',') {
      const size_t start = at + needle.size();
      size_t end = start;
      while (end < labels.size() && labels[end] != '"') end += labels[end] == '\\' ? 2 : 1;
      return labels.substr(start, end - start);
    }
    at += needle.size();
  }
  return "";
}

}  // namespace

// The series read, and where each value goes.
struct Field {
  const char* series;
  double ReplicaModelLoad::*value;
};
constexpr Field kFields[] = {
    {"hone_num_requests_waiting", &ReplicaModelLoad::waiting},
    {"hone_num_requests_running", &ReplicaModelLoad::running},
    {"hone_kv_cache_usage_perc", &ReplicaModelLoad::kv_usage},
    {"hone_slot_wait_seconds", &ReplicaModelLoad::slot_wait_s},
    {"hone_prefill_tokens_per_second", &ReplicaModelLoad::prefill_tps},
    {"hone_e2e_request_latency_seconds_sum", &ReplicaModelLoad::e2e_sum_s},
    {"hone_e2e_request_latency_seconds_count", &ReplicaModelLoad::e2e_count},
    {"hone_request_queue_time_seconds_sum", &ReplicaModelLoad::queue_sum_s},
    {"hone_model_load_duration_seconds_sum", &ReplicaModelLoad::load_sum_s},
    {"hone_model_load_duration_seconds_count", &ReplicaModelLoad::load_count},
};

ReplicaMetrics ParseReplicaMetrics(const std::string& text) {
  ReplicaMetrics all;
  std::istringstream in(text);
  std::string line, name, labels;
  double v = 0;
  while (std::getline(in, line)) {
    if (line.rfind("hone_", 0) != 0 || !SplitSample(line, &name, &labels, &v)) continue;
    if (!std::isfinite(v) || v < 0) continue;
    if (name == "hone_server_draining") {
      all.draining = v > 0;
      continue;
    }
    const std::string model = Label(labels, "model_name");
    if (model.empty()) continue;
    if (name == "hone_cache_config_info") {
      all.models[model].slots = std::atoi(Label(labels, "slots").c_str());
      continue;
    }
    for (const Field& f : kFields) {
      if (name == f.series) {
        all.models[model].*f.value = v;
        break;
      }
    }
  }
  return all;
}

}  // namespace hone::route
