// Who a request is and whether it may pass, decided once per request before
// it is routed: the Host and Origin rules (before any key: a page in the
// user's browser must not reach a key-less server), a browser's body must be
// JSON, then the key it presents (read once: the tenant and the admin scope
// come from the same reading).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/origin_check.h"

namespace hone::api {

// The caller, from the key it presents.
struct Caller {
  bool known = false;      // an API or admin key of this server, or a server without keys
  bool admin = false;      // one of the admin keys
  bool presented = false;  // some key was sent
  std::string tenant;      // the key's fingerprint; empty on a server without keys
};

// What of a request the checks read.
struct RequestHead {
  std::string method, path;
  std::string host, origin, content_type;
  bool has_origin = false;
  std::string authorization, x_api_key;
};

class RequestAuth {
 public:
  RequestAuth(std::vector<std::string> api_keys, OriginPolicy origins);
  // With admin keys (set before serving), only they reach the admin
  // endpoints; without, any API key does.
  void SetAdminKeys(std::vector<std::string> keys) { admin_keys_ = std::move(keys); }
  // Whether the web console is served (--no-ui: its paths need a key like any other).
  void SetConsole(bool served) { console_ = served; }

  Caller Identify(const RequestHead& head) const;
  // The refusals, or nullopt to let the request on. First what a browser
  // may not do (before any key), then, after the body-size check, the key's.
  std::optional<HttpError> CheckBrowser(const RequestHead& head) const;
  std::optional<HttpError> CheckKey(const RequestHead& head, const Caller& who) const;
  // Whether the caller may pin models (keep_alive -1 on a load).
  bool MayPin(const Caller& who) const { return admin_keys_.empty() || who.admin; }
  const OriginPolicy& origins() const { return origins_; }

 private:
  static bool AdminPath(const std::string& path);
  // The web console's files (/ui/, /ui/app.js, ...): they load without a key.
  bool ConsolePath(const std::string& path) const;

  const std::vector<std::string> api_keys_;
  std::vector<std::string> admin_keys_;  // set before serving, then read only
  bool console_ = false;                 // set before serving, then read only
  const OriginPolicy origins_;
};

}  // namespace hone::api
