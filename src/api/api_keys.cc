#include "api/api_keys.h"

#include <algorithm>
#include <cctype>


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

}  // namespace hone::api
