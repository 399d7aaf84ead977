// Which Host and Origin headers a request may carry. A key-less server on
// loopback is reachable from any web page the user opens: a page can POST to
// it (CSRF), and through DNS rebinding read the answers (its own name
// resolving to 127.0.0.1), the class of bug Ollama fixed as CVE-2024-28224.
// So, as Ollama does: on a loopback bind the Host must be a loopback name,
// and a browser's Origin must be a loopback origin or one configured.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hone::api {

struct OriginPolicy {
  bool loopback_bind = true;                 // listening on a loopback address only
  std::vector<std::string> allowed_hosts;    // more Host names (no port); "*": any
  std::vector<std::string> allowed_origins;  // more origins ("https://app.example"); "*": any
};

// localhost, *.localhost, 127.0.0.0/8, ::1 (without port or brackets).
bool IsLoopbackName(const std::string& host);
// "Host: name:port" or "[::1]:port" -> "name" / "::1", lower case.
std::string HostName(const std::string& host_header);
// Whether to serve: nullopt, or the reason for a 403.
std::optional<std::string> CheckHost(const OriginPolicy& p, const std::string& host_header);
std::optional<std::string> CheckOrigin(const OriginPolicy& p, const std::string& origin_header);
// A page of this server itself: its Origin names the Host it asked for
// ("http://box:8080" with "Host: box:8080").
bool IsSameOrigin(const std::string& origin_header, const std::string& host_header);

// Access-Control-Allow-Headers for a preflight that asks for `requested`
// (its Access-Control-Request-Headers): ours, and the names it asks for.
std::string AllowedCorsHeaders(const std::string& requested);

}  // namespace hone::api
