#include "api/serve_settings.h"

#include <toml++/toml.h>

#include <sstream>

namespace hone::api {
namespace {

// A TOML value as the text a flag would give.
Result<std::string> TomlText(const toml::node& n) {
  if (auto str = n.value<std::string>()) return *str;
  if (auto i = n.value<int64_t>()) return std::to_string(*i);
  if (auto b = n.value<bool>()) return std::string(*b ? "true" : "false");
  if (auto d = n.value<double>()) return std::to_string(static_cast<long long>(*d));
  if (auto arr = n.as_array()) {
    std::string v;
    for (const auto& e : *arr)
      if (auto es = e.value<std::string>()) v += (v.empty() ? "" : ",") + *es;
    return v;
  }
  return MakeError(ErrorCode::kInvalidArgument, "unsupported type");
}

Status ApplyModels(serve::ServeConfig& c, const toml::table& t, const std::string& path) {
  if (const toml::array* m = t["model"].as_array()) {
    for (const auto& e : *m)
      if (auto s = e.value<std::string>()) c.models.push_back(*s);
  }
  if (const toml::table* a = t["aliases"].as_table()) {
    for (const auto& [k, v] : *a) {
      auto target = v.value<std::string>();
      if (!target)
        return MakeError(ErrorCode::kInvalidArgument, "config " + path + ": aliases must map to model names");
      c.aliases[std::string(k.str())] = *target;
    }
  }
  return Status::Ok();
}

}  // namespace

const std::vector<Setting<ServeSettings>>& AllSettings() {
  static const std::vector<Setting<ServeSettings>> kAll = [] {
    std::vector<Setting<ServeSettings>> all = LiftSettings(serve::Settings(), &ServeSettings::serve);
    for (auto& s : LiftSettings(HttpSettings(), &ServeSettings::http)) all.push_back(std::move(s));
    return all;
  }();
  return kAll;
}

Status ApplyEnv(ServeSettings& c, const std::function<const char*(const char*)>& getenv) {
  for (const Setting<ServeSettings>& s : AllSettings()) {
    const char* v = getenv(SettingEnvName(s.name).c_str());
    if (!v || !*v) continue;
    if (Status st = s.set(c, v); !st)
      return MakeError(st.error().code, SettingEnvName(s.name) + ": " + st.error().message);
  }
  return Status::Ok();
}

Status ApplyToml(ServeSettings& c, const std::string& path) {
  toml::table t;
  try {
    // Debian's toml++ is built with exceptions: parse errors arrive as one.
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream why;
    why << e.description() << " (line " << e.source().begin.line << ")";
    return MakeError(ErrorCode::kInvalidArgument, "config " + path + ": " + why.str());
  }
  for (const Setting<ServeSettings>& s : AllSettings()) {
    std::string key = s.name;
    for (char& ch : key) ch = ch == '-' ? '_' : ch;
    const toml::node* n = t.get(key);
    if (!n) continue;
    auto v = TomlText(*n);
    if (!v)
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + path + ": '" + key + "' has an unsupported type");
    if (Status st = s.set(c, *v); !st)
      return MakeError(st.error().code, "config " + path + ": " + st.error().message);
  }
  return ApplyModels(c.serve, t, path);
}

}  // namespace hone::api
