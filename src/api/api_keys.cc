#include "api/api_keys.h"

#include <algorithm>
#include <cctype>

#include "api/http_server.h"
#include "route/keyring.h"

namespace hone::api {

std::string PresentedKey(const std::string& authorization, const std::string& x_api_key) {
  std::string key = x_api_key;
  const std::string prefix = "Bearer ";
  if (authorization.size() > prefix.size() &&
      std::equal(prefix.begin(), prefix.end(), authorization.begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
      })) {
    key = authorization.substr(prefix.size());
  }
  return key;
}

bool SameKey(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ (i < b.size() ? b[i] : 0);
  return diff == 0;
}

std::string HttpServer::Tenant(const std::string& authorization, const std::string& x_api_key) const {
  if (api_keys_.empty() && admin_keys_.empty()) return "";
  return route::KeyFingerprint(PresentedKey(authorization, x_api_key));
}

bool HttpServer::IsAdmin(const std::string& authorization, const std::string& x_api_key) const {
  const std::string key = PresentedKey(authorization, x_api_key);
  bool admin = false;
  for (const auto& k : admin_keys_) admin |= !key.empty() && SameKey(key, k);
  return admin;
}

bool HttpServer::Authorized(const std::string& authorization, const std::string& x_api_key) const {
  if (api_keys_.empty()) return true;
  const std::string key = PresentedKey(authorization, x_api_key);
  if (key.empty()) return false;
  bool ok = false;
  for (const auto& k : api_keys_) ok |= SameKey(key, k);
  for (const auto& k : admin_keys_) ok |= SameKey(key, k);
  return ok;
}

}  // namespace hone::api
