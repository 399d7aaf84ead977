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
  double prefill_tps = 0;  // hone_prefill_tokens_per_second (the replica's guess until it measures)
  double e2e_sum_s = 0;    // hone_e2e_request_latency_seconds_sum / _count
  double e2e_count = 0;
  double queue_sum_s = 0;  // hone_request_queue_time_seconds_sum: of e2e, waiting for a slot
  double load_sum_s = 0;   // hone_model_load_duration_seconds_sum / _count
  double load_count = 0;
};

struct ReplicaMetrics {
  bool draining = false;  // hone_server_draining: it refuses new requests
  std::map<std::string, ReplicaModelLoad> models;
};

// The samples of every model in Prometheus text. Lines it does not know, and
// values that are not finite or are negative (a replica reporting garbage
// must not win every request), are skipped.
ReplicaMetrics ParseReplicaMetrics(const std::string& text);

}  // namespace hone::route
