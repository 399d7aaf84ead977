#include "api/messages.h"

#include "api/json_fields.h"

namespace hone::api {
namespace {

bool KnownRole(const std::string& r) {
  return r == "system" || r == "user" || r == "assistant" || r == "developer" || r == "tool";
}

std::string ContentOf(const json& m) {
  if (!m.contains("content")) return "";
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  std::string text;
  if (c.is_array()) {
    for (const auto& part : c) {
      if (part.is_object() && part.value("type", "") == "text") text += part.value("text", "");
    }
  }
  return text;
}

}  // namespace

Result<std::vector<serve::Message>> ParseMessages(const json& messages) {
  if (!messages.is_array()) return BadRequest("'messages' must be an array");
  std::vector<serve::Message> out;
  for (const auto& m : messages) {
    if (!m.is_object()) return BadRequest("each message must be an object");
    Status err;
    auto role = GetString(m, "role", &err);
    if (!err.ok()) return err.error();
    if (!role) return BadRequest("each message needs a 'role'");
    if (!KnownRole(*role)) return BadRequest("unknown message role '" + *role + "'");
    out.push_back({*role == "developer" ? "system" : *role, ContentOf(m)});
  }
  return out;
}

}  // namespace hone::api
