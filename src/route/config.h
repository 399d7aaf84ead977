// The router's part of the `hone serve` TOML file: [[upstream]] tables (remote
// OpenAI-compatible APIs) and [[route]] tables (a public model name and the
// ordered targets that serve it). With neither, every local model is its own
// route, exactly as before the router existed.
//
//   [[upstream]]
//   name = "cloud"
//   base_url = "https://api.example.com/v1"
//   api_keys_env = ["CLOUD_KEY_A", "CLOUD_KEY_B"]  # or api_keys_file, or api_keys (discouraged)
//   models = { "qwen-support" = "qwen2.5-7b-instruct" }  # our name -> theirs
//   connect_timeout = "3s"   first_byte_timeout = "30s"   idle_timeout = "30s"   total_timeout = "10m"
//   max_concurrent = 64      health_path = "/models"      health_interval = "30s"
//   price_input_per_m = 0.15  price_output_per_m = 0.60   continuation = false   ca_file = "ca.pem"
//   breaker = { consecutive_failures = 5, failure_rate = 0.5, min_volume = 20, window = "60s", cooldown =
//   "30s" }
//   kind = "hone"            # another hone replica: its /metrics is read every load_interval ("1s")
//   metrics_url = "http://10.0.0.2:8081/metrics"   # default: base_url's origin + /metrics
//
//   [[route]]
//   name = "support"                              # what clients send as "model"
//   targets = ["local:qwen2.5-0.5b", "cloud:qwen-support"]
//   policy = "local_first"                        # or "failover", "weighted" (with weights = [95, 5]),
//                                                 # "affinity" or "round_robin" (over replicas)
//   ttft_slo = "1.5s"
//   retry = { max_attempts = 3, base_backoff = "100ms", max_backoff = "2s", deadline = "60s" }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "route/breaker.h"
#include "route/retry.h"
#include "util/result.h"

namespace hone::route {

struct UpstreamConfig {
  std::string name;
  std::string base_url;                       // ends without '/': ".../v1"
  std::vector<std::string> keys;              // resolved from env/file/list; never logged
  std::map<std::string, std::string> models;  // public or route model name -> the upstream's name
  double connect_timeout_s = 5;
  double first_byte_timeout_s = 60;
  double idle_timeout_s = 30;
  double total_timeout_s = 600;
  int max_concurrent = 64;
  std::string health_path = "/models";
  double health_interval_s = 30;
  double price_input_per_m = 0;
  double price_cached_input_per_m = -1;  // < 0: the input price
  double price_output_per_m = 0;
  bool continuation = false;  // continues a partial assistant message (prefix continuation)
  std::string ca_file;
  BreakerOptions breaker;
  // kind = "hone": another hone replica. The router reads its load (queue,
  // KV use, slot wait forecast, prefill rate) from metrics_url every
  // load_interval, for the affinity policy.
  bool replica = false;
  std::string metrics_url;  // replicas: default the origin of base_url + "/metrics"
  double load_interval_s = 1;
};

// kAffinity: the target with the least predicted time to first token, where
// the prediction counts each replica's queue and the part of the prompt's
// prefix it has not seen (prefix_affinity.h). kRoundRobin: the targets in
// turn (the baseline affinity is measured against).
enum class Policy { kLocalFirst, kFailover, kWeighted, kAffinity, kRoundRobin };
const char* PolicyName(Policy p);

struct Target {
  std::string upstream;  // "local" or an [[upstream]] name
  std::string model;     // the model name at that target
  bool local() const { return upstream == "local"; }
  std::string Label() const { return upstream + ":" + model; }
};

// A gray release on a route (canary.h): a candidate target beside the route's
// own, given a growing share of conversations, judged step by step.
struct CanaryConfig {
  Target target;
  std::vector<double> steps = {5, 25, 50, 100};  // percent of new conversations
  double hold_s = 600;                           // the least time at a step
  int min_requests = 200;                        // candidate requests a step needs to be judged
  double max_p99_ratio = 1.25;                   // candidate P99 (TTFT, total) over baseline's
  double max_error_rate = 0.02;
  bool shadow = false;  // first mirror steps[0]% to the candidate for one hold, answers discarded
};

struct RouteConfig {
  std::string name;
  std::vector<Target> targets;
  Policy policy = Policy::kLocalFirst;
  double ttft_slo_s = 0;        // 0: overflow only when the local queue is full
  std::vector<double> weights;  // kWeighted: one per target
  RetryPolicy retry;
  // What a spent budget does to this route: stop using the upstream it caps
  // (the local targets still serve) or refuse the request with 429.
  enum class OnBudget { kLocalOnly, kRefuse };
  OnBudget on_budget = OnBudget::kLocalOnly;
  // With a [cache] table: which of this route's requests the response cache
  // serves. kDeterministic: temperature 0 or a fixed seed.
  enum class CacheMode { kOff, kDeterministic, kAll };
  CacheMode cache = CacheMode::kDeterministic;
  std::optional<CanaryConfig> canary;
  // System prompts this route's requests start with, declared shared across
  // tenants: their prefix is reused by every client key (everything after it
  // stays per tenant) and prefilled into the prompt cache of each local
  // target when hone serve starts (serve/shared_prefixes.h).
  std::vector<std::string> shared_system_prompts;
};

// [cache]: the exact-match response cache (response_cache.h). Off without the table.
struct CacheConfig {
  bool enabled = false;
  uint64_t max_bytes = 64ull << 20;
  double ttl_s = 600;
};

// A spending cap. Money is in the prices' currency; caps are kept as int64
// micro-units (1e-6) so the ledger's sums are exact.
struct BudgetConfig {
  std::string name;
  enum class Scope { kGlobal, kUpstream, kTenant };
  Scope scope = Scope::kGlobal;
  std::string scope_name;  // kUpstream: the [[upstream]]; kTenant: a client key's fingerprint "key-…"
  int64_t monthly = 0;     // micro-units; 0: no monthly cap
  int64_t daily = 0;       // micro-units; 0: no daily cap
  std::vector<double> thresholds;  // alert at these fractions of a cap (0.5, 0.8, 0.95)
};

// [spend]: the ledger and how budgets are kept.
struct SpendConfig {
  std::string ledger = "sqlite";  // or "postgres"
  std::string postgres_url_env;   // the variable holding the libpq conninfo (it may carry a password)
  std::string postgres_url;       // resolved from postgres_url_env; never logged
  std::string timezone = "UTC";   // months and days are counted in this zone
  // A reservation left by a process that died is freed after this (live ones are renewed).
  double reservation_ttl_s = 120;
  int reserve_max_tokens = 4096;       // the output a request without max_tokens may use (and is held to)
  std::string alert_webhook;           // POSTed a JSON body when a threshold is crossed
  double local_price_input_per_m = 0;  // an energy rate for local tokens; 0 by default
  double local_price_output_per_m = 0;
  std::vector<BudgetConfig> budgets;
};

struct RouterConfig {
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;
  SpendConfig spend;
  CacheConfig cache;
  bool empty() const { return upstreams.empty() && routes.empty(); }
};

// Reads [[upstream]] and [[route]] from a TOML file (other keys are the
// server's own). `getenv` resolves api_keys_env. Every mistake is an
// kInvalidArgument naming the table and the key.
Result<RouterConfig> LoadRouterConfig(const std::string& path,
                                      const std::function<const char*(const char*)>& getenv);
Result<RouterConfig> ParseRouterConfig(const std::string& toml_text, const std::string& origin,
                                       const std::function<const char*(const char*)>& getenv);

}  // namespace hone::route
