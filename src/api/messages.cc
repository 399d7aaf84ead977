#include "api/messages.h"

#include "api/json_fields.h"
#include "api/tools.h"

namespace hone::api {
namespace {

bool KnownRole(const std::string& r) {
  return r == "system" || r == "user" || r == "assistant" || r == "developer" || r == "tool";
}

// OpenAI's content parts: text is read; images, audio, files and an earlier
// refusal are accepted and left out (this server reads text), as before the
// parts were checked. Any other type is a client's mistake worth a 400.
bool SkippedPart(const std::string& type) {
  return type == "image_url" || type == "input_audio" || type == "file" || type == "refusal";
}

// A content field: absent or null (an assistant turn with only tool calls),
// a string, or an array of part objects whose text parts are joined.
Result<std::string> ContentOf(const json& m, const std::string& where) {
  if (!m.contains("content") || m["content"].is_null()) return std::string();
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array())
    return BadRequest("'" + where + ".content' must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string at = Indexed(where + ".content", i);
    if (!c[i].is_object()) return BadRequest("'" + at + "' must be an object");
    Status err;
    auto type = GetStringAt(c[i], at, "type", &err);
    if (!err.ok()) return err.error();
    if (!type) return BadRequest("'" + at + ".type' is required");
    if (*type == "text") {
      auto t = GetStringAt(c[i], at, "text", &err);
      if (!err.ok()) return err.error();
      if (!t) return BadRequest("'" + at + ".text' is required");
      text += *t;
    } else if (!SkippedPart(*type)) {
      return BadRequest("'" + at + ".type' '" + *type +
                        "' is not a content part type (text, image_url, input_audio, file, refusal)");
    }
  }
  return text;
}

// An assistant message's earlier calls: OpenAI's {id, type, function: {name,
// arguments: "<json>"}} or Ollama's {function: {name, arguments: {...}}}.
Status ParseToolCalls(const json& m, size_t index, std::vector<backend::ToolCall>* out) {
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

Result<std::vector<backend::Message>> ParseMessages(const json& messages) {
  if (!messages.is_array()) return BadRequest("'messages' must be an array");
  if (messages.size() > kMaxMessages) {
    return BadRequest("'messages' has " + std::to_string(messages.size()) + " entries; at most " +
                      std::to_string(kMaxMessages) + " are allowed");
  }
  std::vector<backend::Message> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = Indexed("messages", i);
    if (!m.is_object()) return BadRequest("'" + where + "' must be an object");
    Status err;
    auto role = GetStringAt(m, where, "role", &err);
    if (!err.ok()) return err.error();
    if (!role) return BadRequest("'" + where + "' needs a 'role'");
    if (!KnownRole(*role)) return BadRequest("unknown message role '" + *role + "'");
    backend::Message msg;
    msg.role = *role == "developer" ? "system" : *role;
    auto content = ContentOf(m, where);
    if (!content) return content.error();
    msg.content = std::move(*content);
    if (auto s = ParseToolCalls(m, i, &msg.tool_calls); !s) return s.error();
    auto id = GetStringAt(m, where, "tool_call_id", &err);
    auto name = GetStringAt(m, where, "name", &err);
    auto tool_name = GetStringAt(m, where, "tool_name", &err);  // Ollama's
    if (!err.ok()) return err.error();
    msg.tool_call_id = id.value_or("");
    msg.name = tool_name ? *tool_name : name.value_or("");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace hone::api
