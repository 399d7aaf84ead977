// `hone serve`'s HTTP settings: where it listens, the limits and deadlines
// that protect the port, keys, CORS and Host/Origin rules. Set from the same
// TOML file, HONE_* variables and flags as the engine's (api::ServeSettings).
#pragma once

#include <string>
#include <vector>

#include "util/result.h"
#include "util/settings.h"

namespace hone::api {

struct HttpConfig {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (printed at start)
  int probe_port = -1;         // /health, /livez, /metrics on their own workers; -1: off, 0: any free port
  std::string metrics_compat;  // "vllm": also write vllm:-named series for endpoint pickers
  double drain_timeout = 30;   // seconds SIGTERM lets requests in flight finish
  std::string max_body = "8M";
  int max_connections = 1024;  // API requests on a worker at once (answered, streamed, queued); beyond: 503
  int max_connections_per_client = 0;  // open API connections per client address (0: no cap); beyond: 429
  int defer_accept = 30;  // seconds the kernel holds a connection that has sent nothing (0: off)
  int read_timeout = 30;        // seconds a client may take to send a chunk of its request (headers or body)
  double header_timeout = 30;   // seconds for a whole request's headers (from accept, or the previous answer)
  double body_timeout = 120;    // seconds for a request's body, after its headers
  std::string api_key_file;     // one key per line
  std::string api_keys;         // comma-separated (HONE_API_KEYS); prefer the file
  std::string admin_key_file;   // keys for the admin endpoints, one per line
  std::string admin_keys;       // comma-separated (HONE_ADMIN_KEYS)
  std::string cors_origin;      // empty = CORS off
  std::string allowed_hosts;    // comma-separated Host names beyond loopback ones
  std::string allowed_origins;  // comma-separated web origins beyond loopback ones
  bool quiet = false;           // no per-request log lines
  bool ui = true;               // the web console at /ui/ (--no-ui: off)
};

const std::vector<Setting<HttpConfig>>& HttpSettings();

// Keys from api_key_file and api_keys; empty = no authentication.
Result<std::vector<std::string>> LoadApiKeys(const HttpConfig& c);
// Keys from admin_key_file and admin_keys: with any, only they reach the admin
// endpoints (load, unload, spend, canary commands); empty = any API key does.
Result<std::vector<std::string>> LoadAdminKeys(const HttpConfig& c);

}  // namespace hone::api
