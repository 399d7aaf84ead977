// Tool definitions and tool choice from request bodies, for every codec:
// OpenAI chat's and Ollama's nested form ({"type": "function", "function":
// {...}}), the Responses API's flat form and Anthropic's (name, input_schema)
// all become backend::Tool, with the same checks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "util/result.h"

namespace hone::api {

constexpr size_t kMaxTools = 128;              // OpenAI's own limit
constexpr size_t kMaxSchemaProperties = 100;   // per object of a tool's schema (OpenAI's is 100)
constexpr size_t kMaxSchemaBytes = 64 * 1024;  // one tool's schema, serialized

enum class ToolForm {
  kNested,     // OpenAI chat, Ollama: {"type": "function", "function": {name, description, parameters}}
  kFlat,       // Responses: {"type": "function", name, description, parameters}
  kAnthropic,  // {name, description, input_schema}
};

// body[key], absent or null -> none. Errors: kInvalidArgument naming the tool
// and field (a name must match ^[a-zA-Z0-9_-]{1,64}$, parameters must be an
// object within the limits above, names must be distinct).
Result<std::vector<backend::Tool>> ParseTools(const nlohmann::ordered_json& body, const char* key,
                                            ToolForm form);

// OpenAI's tool_choice: "auto" | "none" | "required" | {"type": "function",
// "function": {"name": …}} (chat) or {"type": "function", "name": …}
// (Responses). A named function must be among `tools`.
Result<backend::ToolChoice> ParseToolChoice(const nlohmann::ordered_json& body,
                                          const std::vector<backend::Tool>& tools);

// A call's arguments as JSON text: a string is taken as is (OpenAI), an
// object is serialized (Ollama, Anthropic). Errors: anything else.
Result<std::string> ArgumentsText(const nlohmann::ordered_json& arguments, const std::string& where);
// The reverse for clients that want an object: JSON text that does not parse
// (a call cut short by max_tokens) becomes {}.
nlohmann::ordered_json ArgumentsObject(const std::string& arguments);

}  // namespace hone::api
