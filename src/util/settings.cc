#include "util/settings.h"

#include <cctype>
#include <sstream>

namespace hone {

std::string SettingEnvName(const char* setting) {
  std::string s = "HONE_";
  for (const char* p = setting; *p; ++p) s += *p == '-' ? '_' : static_cast<char>(std::toupper(*p));
  return s;
}

Status SetInt(const std::string& name, const std::string& v, int* out, int min) {
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= min && n <= 1 << 30) {
      *out = static_cast<int>(n);
      return Status::Ok();
    }
  } catch (...) {
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   name + ": '" + v + "' is not an integer >= " + std::to_string(min));
}

Status SetFraction(const std::string& name, const std::string& v, double* out) {
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size() && d >= 0 && d <= 1) return *out = d, Status::Ok();
  } catch (...) {
  }
  return MakeError(ErrorCode::kInvalidArgument, name + ": '" + v + "' is not a number within [0, 1]");
}

Status SetWholeSeconds(const std::string& name, const std::string& v, double* out, int min) {
  int s = 0;
  Status st = SetInt(name, v, &s, min);
  if (st) *out = s;
  return st;
}

Status SetBool(const std::string& name, const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, Status::Ok();
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, Status::Ok();
  return MakeError(ErrorCode::kInvalidArgument, name + ": '" + v + "' is not true or false");
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace hone
