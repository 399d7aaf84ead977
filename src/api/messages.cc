#include "api/messages.h"

#include "api/json_fields.h"
#include "api/tools.h"

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
      if (part.is_object() && StringOr(part, "type") == "text") text += StringOr(part, "text");
    }
  }
  return text;
}

// An assistant message's earlier calls: OpenAI's {id, type, function: {name,
// arguments: "<json>"}} or Ollama's {function: {name, arguments: {...}}}.
Status ParseToolCalls(const json& m, size_t index, std::vector<serve::ToolCall>* out) {
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return Status::Ok();
  const json& calls = m["tool_calls"];
  const std::string where = "messages[" + std::to_string(index) + "].tool_calls";
  if (!calls.is_array()) return BadRequest("'" + where + "' must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return BadRequest("'" + at + ".function' must be an object");
    }
    const json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return BadRequest("'" + at + ".function.name' is required");
    auto args =
        ArgumentsText(fn.contains("arguments") ? fn["arguments"] : json(), at + ".function.arguments");
    if (!args) return args.error();
    std::string id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
    if (id.empty()) id = "call_" + std::to_string(index) + "_" + std::to_string(i);  // Ollama sends none
    out->push_back({id, fn["name"].get<std::string>(), *args});
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<serve::Message>> ParseMessages(const json& messages) {
  if (!messages.is_array()) return BadRequest("'messages' must be an array");
  if (messages.size() > kMaxMessages) {
    return BadRequest("'messages' has " + std::to_string(messages.size()) + " entries; at most " +
                      std::to_string(kMaxMessages) + " are allowed");
  }
  std::vector<serve::Message> out;
  for (const auto& m : messages) {
    if (!m.is_object()) return BadRequest("each message must be an object");
    Status err;
    auto role = GetString(m, "role", &err);
    if (!err.ok()) return err.error();
    if (!role) return BadRequest("each message needs a 'role'");
    if (!KnownRole(*role)) return BadRequest("unknown message role '" + *role + "'");
    serve::Message msg;
    msg.role = *role == "developer" ? "system" : *role;
    msg.content = ContentOf(m);
    if (auto s = ParseToolCalls(m, out.size(), &msg.tool_calls); !s) return s.error();
    auto id = GetString(m, "tool_call_id", &err);
    auto name = GetString(m, "name", &err);
    auto tool_name = GetString(m, "tool_name", &err);  // Ollama's
    if (!err.ok()) return err.error();
    msg.tool_call_id = id.value_or("");
    msg.name = tool_name ? *tool_name : name.value_or("");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace hone::api
