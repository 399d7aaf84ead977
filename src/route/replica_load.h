// What another hone replica says about its load, read from its /metrics (the
// model-server protocol series, serve/metrics.h), per model.
#pragma once

#include <map>
#include <string>

namespace hone::route {

struct ReplicaModelLoad {
  double waiting = 0;      // hone_num_requests_waiting
  double running = 0;      // hone_num_requests_running
  double kv_usage = 0;     // hone_kv_cache_usage_perc
  int slots = 0;           // hone_cache_config_info{slots}; 0: not loaded there
  double slot_wait_s = 0;  // hone_slot_wait_seconds: its own forecast of a new request's wait
  double prefill_tps = 0;  // hone_prefill_tokens_per_second; 0: not measured yet
  double e2e_sum_s = 0;    // hone_e2e_request_latency_seconds_sum / _count
  double e2e_count = 0;
  double queue_sum_s = 0;  // hone_request_queue_time_seconds_sum: of e2e, waiting for a slot
};

// The samples of every model in Prometheus text; lines it does not know are skipped.
std::map<std::string, ReplicaModelLoad> ParseReplicaMetrics(const std::string& text);

}  // namespace hone::route
