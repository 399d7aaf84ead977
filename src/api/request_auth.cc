#include "api/request_auth.h"

#include "api/api_keys.h"
#include "api/console_assets.h"
#include "route/keyring.h"

namespace hone::api {

RequestAuth::RequestAuth(std::vector<std::string> api_keys, OriginPolicy origins)
    : api_keys_(std::move(api_keys)), origins_(std::move(origins)) {}

bool RequestAuth::AdminPath(const std::string& path) {
  return path == "/hone/load" || path == "/hone/unload" || path == "/hone/spend" || path == "/hone/cache" ||
         path == "/hone/routes/canary";
}

Caller RequestAuth::Identify(const RequestHead& head) const {
  Caller who;
  const std::string key = PresentedKey(head.authorization, head.x_api_key);
  who.presented = !key.empty();
  for (const auto& k : admin_keys_) who.admin |= who.presented && SameKey(key, k);
  if (api_keys_.empty()) {
    who.known = true;
  } else if (who.presented) {
    for (const auto& k : api_keys_) who.known |= SameKey(key, k);
    who.known |= who.admin;
  }
  if (!api_keys_.empty() || !admin_keys_.empty()) who.tenant = route::KeyFingerprint(key);
  return who;
}

std::optional<HttpError> RequestAuth::CheckBrowser(const RequestHead& head) const {
  if (auto refused = CheckHost(origins_, head.host)) return Forbidden(*refused);
  // The web console on a public address: its Origin is the Host it asked.
  // Taken only behind keys: without them a rebinding page (its own name
  // resolving to this server) would match its own Host just the same.
  if (auto refused = CheckOrigin(origins_, head.origin);
      refused && (api_keys_.empty() || !IsSameOrigin(head.origin, head.host)))
    return Forbidden(*refused);
  // A browser's POST (it sends an Origin) must say JSON: a form or a
  // text/plain body is what a page may send without a CORS preflight.
  // Programs send no Origin, and often text/plain (fetch with a string
  // body, curl -d): those pass, as Ollama lets them.
  if (head.method == "POST" && head.has_origin && head.content_type.rfind("application/json", 0) != 0)
    return NotJson(head.content_type);
  return std::nullopt;
}

// Exactly the console's own files, and only while it is served: a wider
// prefix would turn any later path normalisation into a way past the key.
bool RequestAuth::ConsolePath(const std::string& path) const {
  if (!console_) return false;
  if (path == "/ui" || path == "/ui/") return true;
  if (path.rfind("/ui/", 0) != 0) return false;
  const std::string name = path.substr(4);
  for (const ConsoleAsset& a : ConsoleAssets())
    if (name == a.name) return true;
  return false;
}

std::optional<HttpError> RequestAuth::CheckKey(const RequestHead& head, const Caller& who) const {
  // The console's page and scripts hold no data: they load without a key and
  // ask for one, then send it with each API call (the Host and Origin checks
  // still ran in CheckBrowser).
  if ((head.method == "GET" || head.method == "HEAD") && ConsolePath(head.path)) return std::nullopt;
  // The prompt cache lists every tenant's entries and their ages, and clears
  // them all: with client keys, only an admin key may (none set: nobody).
  if (head.path == "/hone/cache" && !api_keys_.empty() && admin_keys_.empty())
    return Forbidden("/hone/cache needs an admin key (--admin-keys) on a server with API keys");
  if (AdminPath(head.path) && !admin_keys_.empty()) {
    if (who.admin) return std::nullopt;
    if (who.presented && who.known) return Forbidden(head.path + " needs an admin key (--admin-keys)");
    return Unauthenticated();
  }
  if (who.known) return std::nullopt;
  return Unauthenticated();
}

}  // namespace hone::api
