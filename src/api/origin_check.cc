#include "api/origin_check.h"

#include <algorithm>
#include <cctype>

namespace hone::api {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Listed(const std::vector<std::string>& list, const std::string& v) {
  for (const auto& x : list) {
    if (x == "*" || Lower(x) == v) return true;
  }
  return false;
}

}  // namespace

bool IsLoopbackName(const std::string& h) {
  if (h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1") return true;
  if (h.size() > 10 && h.compare(h.size() - 10, 10, ".localhost") == 0) return true;
  // 127.0.0.0/8, as a dotted quad.
  if (h.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : h) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

std::string HostName(const std::string& header) {
  std::string h = Lower(header);
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return close == std::string::npos ? h : h.substr(1, close - 1);
  }
  const size_t colon = h.find(':');
  if (colon != std::string::npos && h.find(':', colon + 1) == std::string::npos) h.resize(colon);
  return h;
}

std::optional<std::string> CheckHost(const OriginPolicy& p, const std::string& header) {
  if (!p.loopback_bind || header.empty()) return std::nullopt;  // HTTP/1.0 sends none
  const std::string name = HostName(header);
  if (IsLoopbackName(name) || Listed(p.allowed_hosts, name)) return std::nullopt;
  return "the Host '" + header +
         "' is not a name of this loopback server (a page using DNS rebinding sends its own); "
         "add it with --allowed-hosts";
}

std::optional<std::string> CheckOrigin(const OriginPolicy& p, const std::string& header) {
  if (header.empty()) return std::nullopt;  // not a browser, or a same-origin GET
  const std::string origin = Lower(header);
  const size_t scheme = origin.find("://");
  if (scheme != std::string::npos) {
    const std::string name = HostName(origin.substr(scheme + 3));
    if (IsLoopbackName(name)) return std::nullopt;
  }
  if (Listed(p.allowed_origins, origin)) return std::nullopt;
  return "requests from the web origin '" + header + "' are not allowed; add it with --allowed-origins";
}

bool IsSameOrigin(const std::string& origin_header, const std::string& host_header) {
  const std::string origin = Lower(origin_header);
  const size_t scheme = origin.find("://");
  if (scheme == std::string::npos || host_header.empty()) return false;
  const std::string scheme_name = origin.substr(0, scheme);
  if (scheme_name != "http" && scheme_name != "https") return false;
  return origin.substr(scheme + 3) == Lower(host_header);
}

// The headers a page may send: ours, and whatever its preflight asks for
// (the official JavaScript SDKs add x-stainless-* and anthropic-* headers
// that a fixed list would refuse). Only the origin that --cors-origin names
// gets this answer, so echoing its header names grants it nothing else; a
// name with other characters than a header name has is left out.
std::string AllowedCorsHeaders(const std::string& requested) {
  std::string out = "Authorization, Content-Type, x-api-key, anthropic-version";
  std::string name;
  auto flush = [&] {
    if (!name.empty() && name.size() <= 64) out += ", " + name;
    name.clear();
  };
  bool bad = false;
  for (char c : requested + ",") {
    if (c == ',') {
      if (!bad) flush();
      name.clear();
      bad = false;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      name += c;
    } else if (c != ' ' && c != '\t') {
      bad = true;
    }
  }
  return out;
}

}  // namespace hone::api
