#include "api/tools.h"

#include <algorithm>
#include <set>

#include "api/json_fields.h"

namespace hone::api {
namespace {

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (unsigned char c : n) {
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  }
  return true;
}

// The most properties any object of a schema may have: llama.cpp's
// schema-to-grammar converter does work cubic in an object's optional ones.
size_t MostProperties(const json& s) {
  size_t most = 0;
  if (s.is_object()) {
    if (s.contains("properties") && s["properties"].is_object()) most = s["properties"].size();
    for (const auto& [k, v] : s.items()) most = std::max(most, MostProperties(v));
  } else if (s.is_array()) {
    for (const auto& v : s) most = std::max(most, MostProperties(v));
  }
  return most;
}

}  // namespace

Result<std::vector<backend::Tool>> ParseTools(const json& body, const char* key, ToolForm form) {
  std::vector<backend::Tool> out;
  if (!body.contains(key) || body[key].is_null()) return out;
  const json& tools = body[key];
  const std::string field = std::string("'") + key + "'";
  if (!tools.is_array()) return BadRequest(field + " must be an array");
  if (tools.size() > kMaxTools) {
    return BadRequest(field + " has " + std::to_string(tools.size()) + " entries; at most " +
                      std::to_string(kMaxTools) + " are allowed");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) return BadRequest("'" + where + "' must be an object");
    const json* fn = &t;
    const char* schema_key = form == ToolForm::kAnthropic ? "input_schema" : "parameters";
    if (form != ToolForm::kAnthropic) {
      const std::string type = StringOr(t, "type");
      if (type != "function") return BadRequest("'" + where + ".type' must be \"function\"");
    }
    if (form == ToolForm::kNested) {
      if (!t.contains("function") || !t["function"].is_object()) {
        return BadRequest("'" + where + ".function' must be an object");
      }
      fn = &t["function"];
    }
    Status err;
    auto name = GetString(*fn, "name", &err);
    auto description = GetString(*fn, "description", &err);
    if (!err.ok()) return BadRequest("'" + where + "': " + err.error().message);
    if (!name || !ValidName(*name)) {
      return BadRequest("'" + where + "' needs a 'name' of 1 to 64 letters, digits, '_' or '-'");
    }
    if (!names.insert(*name).second) return BadRequest("two tools are named '" + *name + "'");
    backend::Tool tool{*name, description.value_or(""), ""};
    if (fn->contains(schema_key) && !(*fn)[schema_key].is_null()) {
      if (!(*fn)[schema_key].is_object()) {
        return BadRequest("'" + where + "." + schema_key + "' must be a JSON schema object");
      }
      if (MostProperties((*fn)[schema_key]) > kMaxSchemaProperties) {
        return BadRequest("'" + where + "." + schema_key + "' has an object with more than " +
                          std::to_string(kMaxSchemaProperties) + " properties");
      }
      tool.parameters = Dump((*fn)[schema_key]);
      if (tool.parameters.size() > kMaxSchemaBytes) {
        return BadRequest("'" + where + "." + schema_key + "' is larger than " +
                          std::to_string(kMaxSchemaBytes / 1024) + " KiB");
      }
    }
    out.push_back(std::move(tool));
  }
  return out;
}

Result<backend::ToolChoice> ParseToolChoice(const json& body, const std::vector<backend::Tool>& tools) {
  backend::ToolChoice c;
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return c;
  const json& j = body["tool_choice"];
  if (j.is_string()) {
    const std::string v = j.get<std::string>();
    if (v == "auto") return c;
    if (v == "none") return c.mode = backend::ToolChoice::Mode::kNone, c;
    if (v == "required") {
      if (tools.empty()) return BadRequest("'tool_choice' is \"required\" but there are no 'tools'");
      return c.mode = backend::ToolChoice::Mode::kRequired, c;
    }
    return BadRequest("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function");
  }
  if (!j.is_object() || StringOr(j, "type") != "function") {
    return BadRequest(
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}");
  }
  std::string name;
  if (j.contains("function") && j["function"].is_object() && j["function"].contains("name") &&
      j["function"]["name"].is_string()) {
    name = j["function"]["name"].get<std::string>();
  } else if (j.contains("name") && j["name"].is_string()) {
    name = j["name"].get<std::string>();
  } else {
    return BadRequest("'tool_choice' names no function");
  }
  bool known = false;
  for (const auto& t : tools) known |= t.name == name;
  if (!known) return BadRequest("'tool_choice' names the function '" + name + "', which is not in 'tools'");
  c.mode = backend::ToolChoice::Mode::kRequired;
  c.function = name;
  return c;
}

Result<std::string> ArgumentsText(const json& a, const std::string& where) {
  if (a.is_string()) return a.get<std::string>();
  if (a.is_object()) return Dump(a);
  if (a.is_null()) return std::string("{}");
  return BadRequest("'" + where + "' must be a JSON object or a string of one");
}

json ArgumentsObject(const std::string& arguments) {
  json j = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json::object();
}

}  // namespace hone::api
