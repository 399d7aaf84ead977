// A settings table: each setting's name (flag --name, environment HONE_NAME,
// TOML key name with '_'), its help and how a text value sets it. `hone
// serve` has one table per layer (serve::Settings for the engine,
// api::HttpSettings for the HTTP edge), joined by api::ServeSettings; flags,
// environment and config file all go through the same `set`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone {

template <class Config>
struct Setting {
  const char* name;
  const char* help;
  std::function<Status(Config&, const std::string&)> set;
};

// The same settings over a part of a larger config (`member` of Whole).
template <class Whole, class Part>
std::vector<Setting<Whole>> LiftSettings(const std::vector<Setting<Part>>& part, Part Whole::*member) {
  std::vector<Setting<Whole>> out;
  for (const Setting<Part>& s : part) {
    auto set = s.set;
    out.push_back(
        {s.name, s.help, [set, member](Whole& w, const std::string& v) { return set(w.*member, v); }});
  }
  return out;
}

// "HONE_" + the name upper-cased, '-' -> '_'.
std::string SettingEnvName(const char* setting);

// Value parsers for tables: errors name the setting.
Status SetInt(const std::string& name, const std::string& v, int* out, int min);
Status SetFraction(const std::string& name, const std::string& v, double* out);  // within [0, 1]
Status SetWholeSeconds(const std::string& name, const std::string& v, double* out, int min);
Status SetBool(const std::string& name, const std::string& v, bool* out);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitComma(const std::string& s);

}  // namespace hone
