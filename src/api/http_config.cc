#include "api/http_config.h"

#include <cctype>
#include <fstream>

namespace hone::api {
namespace {

// A TCP port: 0 (any free port) to 65535.
Status SetPort(const char* name, const std::string& v, int* port) {
  Status s = SetInt(name, v, port, 0);
  if (s && *port > 65535)
    return Status(MakeError(ErrorCode::kInvalidArgument, std::string(name) + ": " + v + " is above 65535"));
  return s;
}

}  // namespace

const std::vector<Setting<HttpConfig>>& HttpSettings() {
  static const std::vector<Setting<HttpConfig>> kSettings = {
      {"host", "Address to bind",
       [](HttpConfig& c, const std::string& v) { return c.host = v, Status::Ok(); }},
      {"port", "Port (0 = any free port)",
       [](HttpConfig& c, const std::string& v) { return SetPort("port", v, &c.port); }},
      {"probe-port",
       "Port for /health, /livez and /metrics alone, served by their own threads and without a key "
       "(default: off; 0 = any free port)",
       [](HttpConfig& c, const std::string& v) { return SetPort("probe-port", v, &c.probe_port); }},
      {"metrics-compat", "vllm: /metrics also writes vLLM's names (vllm:num_requests_waiting, ...)",
       [](HttpConfig& c, const std::string& v) {
         if (v != "vllm" && v != "none")
           return Status(
               MakeError(ErrorCode::kInvalidArgument, "metrics-compat: '" + v + "' is not vllm or none"));
         c.metrics_compat = v == "none" ? "" : v;
         return Status::Ok();
       }},
      {"max-connections",
       "API requests on a worker at once (being answered, streamed or queued); beyond it 503 + Retry-After. "
       "Connections still sending their request, or idle, hold no worker",
       [](HttpConfig& c, const std::string& v) {
         return SetInt("max-connections", v, &c.max_connections, 1);
       }},
      {"max-connections-per-client",
       "Open API connections one client address may hold (0 = no cap); beyond it 429 at accept "
       "(with --defer-accept, at the connection's first byte)",
       [](HttpConfig& c, const std::string& v) {
         return SetInt("max-connections-per-client", v, &c.max_connections_per_client, 0);
       }},
      {"defer-accept",
       "Seconds the kernel keeps a new API connection that has sent nothing before hone accepts it "
       "(TCP_DEFER_ACCEPT; 0 = off). Until its first byte such a connection costs hone no descriptor "
       "or wakeup and does not count against --max-connections-per-client",
       [](HttpConfig& c, const std::string& v) { return SetInt("defer-accept", v, &c.defer_accept, 0); }},
      {"read-timeout", "Seconds a client may stay silent while sending its request (headers or body)",
       [](HttpConfig& c, const std::string& v) { return SetInt("read-timeout", v, &c.read_timeout, 1); }},
      {"header-timeout", "Seconds a client may take to send a whole request's headers (slowloris guard)",
       [](HttpConfig& c, const std::string& v) {
         return SetWholeSeconds("header-timeout", v, &c.header_timeout, 1);
       }},
      {"body-timeout", "Seconds a client may take to send a request's body, after its headers",
       [](HttpConfig& c, const std::string& v) {
         return SetWholeSeconds("body-timeout", v, &c.body_timeout, 1);
       }},
      {"drain-timeout", "Seconds a SIGTERM lets requests in flight finish before they are cut short",
       [](HttpConfig& c, const std::string& v) {
         int s = 0;
         Status st = SetInt("drain-timeout", v, &s, 0);
         if (st) c.drain_timeout = s;
         return st;
       }},
      {"max-body", "Largest request body (e.g. 8M)",
       [](HttpConfig& c, const std::string& v) { return c.max_body = v, Status::Ok(); }},
      {"api-key-file", "File of API keys, one per line (Bearer auth)",
       [](HttpConfig& c, const std::string& v) { return c.api_key_file = v, Status::Ok(); }},
      {"api-keys",
       "Comma-separated API keys, from the environment or a config file only (a flag would show in ps)",
       [](HttpConfig& c, const std::string& v) { return c.api_keys = v, Status::Ok(); }},
      {"admin-key-file", "File of admin keys (load, unload, spend, canary); default: any API key",
       [](HttpConfig& c, const std::string& v) { return c.admin_key_file = v, Status::Ok(); }},
      {"admin-keys",
       "Comma-separated admin keys, from the environment or a config file only (a flag would show in ps)",
       [](HttpConfig& c, const std::string& v) { return c.admin_keys = v, Status::Ok(); }},
      {"cors-origin", "Allowed CORS origin (default: CORS off)",
       [](HttpConfig& c, const std::string& v) { return c.cors_origin = v, Status::Ok(); }},
      {"allowed-hosts",
       "Comma-separated Host names accepted on a loopback bind besides localhost ones ('*': any)",
       [](HttpConfig& c, const std::string& v) { return c.allowed_hosts = v, Status::Ok(); }},
      {"allowed-origins", "Comma-separated web origins accepted besides localhost ones ('*': any)",
       [](HttpConfig& c, const std::string& v) { return c.allowed_origins = v, Status::Ok(); }},
      {"quiet", "No per-request log lines",
       [](HttpConfig& c, const std::string& v) { return SetBool("quiet", v, &c.quiet); }},
      {"ui", "Serve the web console at /ui/ (true/false; --no-ui turns it off)",
       [](HttpConfig& c, const std::string& v) { return SetBool("ui", v, &c.ui); }},
  };
  return kSettings;
}

namespace {

Result<std::vector<std::string>> LoadKeys(const std::string& list, const std::string& file,
                                          const char* what) {
  std::vector<std::string> keys = SplitComma(list);
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) return MakeError(ErrorCode::kNotFound, std::string("cannot read the ") + what + " file " + file);
    for (std::string line; std::getline(f, line);) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      if (!line.empty() && line[0] != '#') keys.push_back(line);
    }
    if (keys.empty())
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("the ") + what + " file " + file + " has no keys");
  }
  return keys;
}

}  // namespace

Result<std::vector<std::string>> LoadApiKeys(const HttpConfig& c) {
  return LoadKeys(c.api_keys, c.api_key_file, "API key");
}

Result<std::vector<std::string>> LoadAdminKeys(const HttpConfig& c) {
  return LoadKeys(c.admin_keys, c.admin_key_file, "admin key");
}

}  // namespace hone::api
