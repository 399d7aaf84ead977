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

// [model_options.NAME]: spec, draft and shared system prompts for one model.
Status ApplyModelOptions(serve::ServeConfig& c, const toml::table& t, const std::string& path) {
  const toml::node* node = t.get("model_options");
  if (!node) return Status::Ok();
  const toml::table* all = node->as_table();
  if (!all)
    return MakeError(ErrorCode::kInvalidArgument, "config " + path + ": model_options must be a table");
  for (const auto& [name, v] : *all) {
    const toml::table* m = v.as_table();
    const std::string where = "config " + path + ": model_options." + std::string(name.str());
    if (!m) return MakeError(ErrorCode::kInvalidArgument, where + " must be a table");
    serve::ServeConfig::ModelOptions o;
    for (const auto& [key, value] : *m) {
      if (key.str() == "shared_system_prompts") {
        const toml::array* a = value.as_array();
        for (size_t i = 0; a && i < a->size(); ++i) {
          auto text = (*a)[i].value<std::string>();
          if (!text || text->empty()) a = nullptr;
          if (a) o.shared_system_prompts.push_back(*text);
        }
        if (!a)
          return MakeError(ErrorCode::kInvalidArgument,
                           where + ".shared_system_prompts must be a list of non-empty strings");
        continue;
      }
      auto text = value.value<std::string>();
      if (!text)
        return MakeError(ErrorCode::kInvalidArgument,
                         where + "." + std::string(key.str()) + " must be a string");
      if (key.str() == "spec") {
        o.spec = *text;
      } else if (key.str() == "draft") {
        o.draft = *text;
      } else {
        return MakeError(ErrorCode::kInvalidArgument, where + ": unknown key '" + std::string(key.str()) +
                                                          "' (spec, draft, shared_system_prompts)");
      }
    }
    c.model_options[std::string(name.str())] = o;
  }
  return Status::Ok();
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
  return ApplyModelOptions(c, t, path);
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
