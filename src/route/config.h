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
//
//   [[route]]
//   name = "support"                              # what clients send as "model"
//   targets = ["local:qwen2.5-0.5b", "cloud:qwen-support"]
//   policy = "local_first"                        # or "failover", "weighted" (with weights = [95, 5])
//   ttft_slo = "1.5s"
//   retry = { max_attempts = 3, base_backoff = "100ms", max_backoff = "2s", deadline = "60s" }
#pragma once

#include <map>
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
  double price_output_per_m = 0;
  bool continuation = false;  // continues a partial assistant message (prefix continuation)
  std::string ca_file;
  BreakerOptions breaker;
};

enum class Policy { kLocalFirst, kFailover, kWeighted };
const char* PolicyName(Policy p);

struct Target {
  std::string upstream;  // "local" or an [[upstream]] name
  std::string model;     // the model name at that target
  bool local() const { return upstream == "local"; }
  std::string Label() const { return upstream + ":" + model; }
};

struct RouteConfig {
  std::string name;
  std::vector<Target> targets;
  Policy policy = Policy::kLocalFirst;
  double ttft_slo_s = 0;        // 0: overflow only when the local queue is full
  std::vector<double> weights;  // kWeighted: one per target
  RetryPolicy retry;
};

struct RouterConfig {
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;
  bool empty() const { return upstreams.empty() && routes.empty(); }
};

// "1.5s", "100ms", "5m", "1h", or a bare number of seconds.
Result<double> ParseSeconds(const std::string& text);

// Reads [[upstream]] and [[route]] from a TOML file (other keys are the
// server's own). `getenv` resolves api_keys_env. Every mistake is an
// kInvalidArgument naming the table and the key.
Result<RouterConfig> LoadRouterConfig(const std::string& path,
                                      const std::function<const char*(const char*)>& getenv);
Result<RouterConfig> ParseRouterConfig(const std::string& toml_text, const std::string& origin,
                                       const std::function<const char*(const char*)>& getenv);

}  // namespace hone::route
