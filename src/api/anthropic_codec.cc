#include "api/anthropic_codec.h"

#include "api/json_fields.h"
#include "api/tools.h"

namespace hone::api::anthropic {
namespace {

// A block's type: the block must be an object with a string `type`.
Result<std::string> BlockType(const json& b, const std::string& at) {
  if (!b.is_object()) return BadRequest("'" + at + "' must be an object");
  Status err;
  auto type = GetStringAt(b, at, "type", &err);
  if (!err.ok()) return err.error();
  if (!type) return BadRequest("'" + at + ".type' is required");
  return *type;
}

// A text block's text, which must be a string.
Result<std::string> BlockText(const json& b, const std::string& at) {
  if (!b.contains("text") || !b["text"].is_string()) return BadRequest("'" + at + ".text' must be a string");
  return b["text"].get<std::string>();
}

// `system` or a tool_result's content: a string, or text blocks, joined.
// Images and documents are refused (this server reads text); any other block
// is a client's mistake.
Result<std::string> TextOf(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array())
    return BadRequest("'" + where + "' must be a string or an array of content blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = Indexed(where, i);
    auto type = BlockType(content[i], at);
    if (!type) return type.error();
    if (*type == "image" || *type == "document")
      return BadRequest("'" + at + "': " + *type + " blocks are not supported; this server reads text only");
    if (*type != "text") return BadRequest("'" + at + ".type' '" + *type + "' is not a text block");
    auto t = BlockText(content[i], at);
    if (!t) return t.error();
    text += *t;
  }
  return text;
}

// One Anthropic message as hone's: text and tool_use blocks make an assistant
// turn; each tool_result block becomes a tool turn, before the user's text.
Status AddMessage(const json& m, size_t index, std::vector<backend::Message>* out) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return BadRequest("'" + where + "' must be an object");
  Status err;
  auto role = GetStringAt(m, where, "role", &err);
  if (!err.ok()) return err.error();
  if (role != "user" && role != "assistant")
    return BadRequest("'" + where + ".role' must be \"user\" or \"assistant\"");
  if (!m.contains("content")) return BadRequest("'" + where + ".content' is required");
  const json& content = m["content"];
  backend::Message msg(*role, "");
  if (content.is_string()) {
    msg.content = content.get<std::string>();
    out->push_back(std::move(msg));
    return Status::Ok();
  }
  if (!content.is_array())
    return BadRequest("'" + where + ".content' must be a string or an array of content blocks");
  for (size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    const std::string at = Indexed(where + ".content", i);
    auto block = BlockType(b, at);
    if (!block) return block.error();
    const std::string& type = *block;
    if (type == "text") {
      auto text = BlockText(b, at);
      if (!text) return text.error();
      msg.content += *text;
    } else if (type == "tool_use") {
      if (*role != "assistant")
        return BadRequest("'" + at + "': tool_use blocks belong to assistant messages");
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string()) {
        return BadRequest("'" + at + "' needs an 'id' and a 'name'");
      }
      auto args = ArgumentsText(b.contains("input") ? b["input"] : json(), at + ".input");
      if (!args) return args.error();
      msg.tool_calls.push_back({b["id"].get<std::string>(), b["name"].get<std::string>(), *args});
    } else if (type == "tool_result") {
      if (*role != "user") return BadRequest("'" + at + "': tool_result blocks belong to user messages");
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) {
        return BadRequest("'" + at + ".tool_use_id' is required");
      }
      auto text = TextOf(b.contains("content") ? b["content"] : json(), at + ".content");
      if (!text) return text.error();
      backend::Message result("tool", *text);
      if (BoolOr(b, "is_error", false)) result.content = "Error: " + result.content;
      result.tool_call_id = b["tool_use_id"].get<std::string>();
      out->push_back(std::move(result));
    } else if (type == "image" || type == "document") {
      return BadRequest("'" + at + "': " + type + " blocks are not supported; this server reads text only");
    } else if (type == "thinking" || type == "redacted_thinking") {
      continue;  // an earlier answer's reasoning: not part of the prompt
    } else {
      return BadRequest("'" + at + ".type' '" + type + "' is not a content block this server reads");
    }
  }
  if (!msg.content.empty() || !msg.tool_calls.empty()) out->push_back(std::move(msg));
  return Status::Ok();
}

Result<backend::ToolChoice> ParseChoice(const json& j, const std::vector<backend::Tool>& tools,
                                      std::optional<bool>* parallel) {
  backend::ToolChoice c;
  if (!j.contains("tool_choice") || j["tool_choice"].is_null()) return c;
  const json& t = j["tool_choice"];
  const std::string type = t.is_object() ? StringOr(t, "type") : "";
  if (t.is_object() && BoolOr(t, "disable_parallel_tool_use", false)) *parallel = false;
  if (type == "auto") return c;
  if (type == "none") return c.mode = backend::ToolChoice::Mode::kNone, c;
  if (type == "any" || type == "tool") {
    if (tools.empty()) return BadRequest("'tool_choice' asks for a tool but there are no 'tools'");
    c.mode = backend::ToolChoice::Mode::kRequired;
    if (type == "any") return c;
    const std::string name = StringOr(t, "name");
    bool known = false;
    for (const auto& tool : tools) known |= tool.name == name;
    if (!known) return BadRequest("'tool_choice.name' '" + name + "' is not in 'tools'");
    c.function = name;
    return c;
  }
  return BadRequest("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\"");
}

json UsageJson(const backend::Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"output_tokens", u.completion_tokens},
          {"cache_read_input_tokens", u.cached_tokens},
          {"cache_creation_input_tokens", 0}};
}

std::string Event(const char* type, json data) {
  data["type"] = type;
  return std::string("event: ") + type + "\ndata: " + Dump(data) + "\n\n";
}

// The content blocks of one streamed answer: a text block opens on the first
// text, a tool_use block on each call's first piece; starting one closes the
// one before.
class Stream final : public StreamEncoder {
 public:
  explicit Stream(const Answer& a) : a_(a) {}
  std::string Begin() override {
    json message = {
        {"id", a_.id},       {"type", "message"},      {"role", "assistant"},      {"content", json::array()},
        {"model", a_.model}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", UsageJson({})}};
    return Event("message_start", {{"message", message}});
  }
  std::string Text(size_t, const std::string& text) override {
    std::string out;
    if (open_ != Block::kText) {
      out += Close();
      out += Event("content_block_start",
                   {{"index", index_}, {"content_block", {{"type", "text"}, {"text", ""}}}});
      open_ = Block::kText;
    }
    return out + Event("content_block_delta",
                       {{"index", index_}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  std::string ToolCall(size_t, const backend::ToolCallDelta& d) override {
    std::string out;
    if (!d.name.empty()) {
      out += Close();
      out += Event("content_block_start",
                   {{"index", index_},
                    {"content_block",
                     {{"type", "tool_use"}, {"id", d.id}, {"name", d.name}, {"input", json::object()}}}});
      open_ = Block::kTool;
    }
    if (open_ == Block::kTool && !d.arguments.empty()) {
      out += Event(
          "content_block_delta",
          {{"index", index_}, {"delta", {{"type", "input_json_delta"}, {"partial_json", d.arguments}}}});
    }
    return out;
  }
  std::string ChoiceEnd(size_t, const backend::ChoiceResult& r) override {
    return Close() + Event("message_delta",
                           {{"delta", {{"stop_reason", StopReason(r)}, {"stop_sequence", StopSequence(r)}}},
                            {"usage", UsageJson(r.usage)}});
  }
  std::string End(const backend::Usage&) override { return Event("message_stop", json::object()); }
  std::string Failure(const Error& e) override {
    HttpError h = ToHttpError(e, ApiFlavor::kAnthropic);
    return Event("error", {{"error", {{"type", AnthropicErrorType(h.status)}, {"message", h.message}}}});
  }

 private:
  enum class Block { kNone, kText, kTool };
  std::string Close() {
    if (open_ == Block::kNone) return "";
    open_ = Block::kNone;
    return Event("content_block_stop", {{"index", index_++}});
  }
  const Answer a_;
  Block open_ = Block::kNone;
  int index_ = 0;  // of the open block, or of the next one
};

}  // namespace

json StopSequence(const backend::ChoiceResult& r) {
  return r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence);
}

const char* StopReason(const backend::ChoiceResult& r) {
  if (r.finish == backend::FinishReason::kStop && !r.stop_sequence.empty()) return "stop_sequence";
  switch (r.finish) {
    case backend::FinishReason::kLength:
      return "max_tokens";
    case backend::FinishReason::kToolCalls:
      return "tool_use";
    default:
      return "end_turn";
  }
}

namespace {

// What /v1/messages and count_tokens both read: system, messages, tools and
// tool_choice, as the chat the template renders.
Status ParseConversation(const json& j, backend::GenerationRequest* r) {
  r->chat = true;
  if (j.contains("system") && !j["system"].is_null()) {
    auto system = TextOf(j["system"], "system");
    if (!system) return system.error();
    if (!system->empty()) r->messages.emplace_back("system", *system);
  }
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
    return BadRequest("'messages' must be a non-empty array");
  }
  if (j["messages"].size() > kMaxMessages) {
    return BadRequest("'messages' has more than " + std::to_string(kMaxMessages) + " entries");
  }
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    if (Status st = AddMessage(j["messages"][i], i, &r->messages); !st) return st;
  }
  // Blocks that add nothing (thinking) may leave no message at all.
  if (r->messages.empty()) return BadRequest("'messages' holds no text, tool_use or tool_result block");
  auto tools = ParseTools(j, "tools", ToolForm::kAnthropic);
  if (!tools) return tools.error();
  r->tools = std::move(*tools);
  auto choice = ParseChoice(j, r->tools, &r->parallel_tool_calls);
  if (!choice) return choice.error();
  r->tool_choice = *choice;
  // A trailing assistant message is a prefill Anthropic's API continues.
  if (r->messages.back().role == "assistant" && r->messages.back().tool_calls.empty())
    r->continue_final = true;
  return Status::Ok();
}

}  // namespace

Result<ParsedGeneration> MessagesCodec::Parse(const json& j) const {
  ParsedGeneration p;
  backend::GenerationRequest& r = p.request;
  auto model = RequireString(j, "model", "'model' is required");
  if (!model) return model.error();
  r.model = *model;
  Status err;
  backend::Sampling& s = r.sampling;
  // Anthropic's defaults: temperature 1 over the whole distribution.
  s.temperature = 1.0f, s.top_p = 1.0f, s.top_k = 0, s.min_p = 0.0f;
  if (auto v = GetNumber(j, "temperature", &err)) s.temperature = static_cast<float>(*v);
  if (auto v = GetNumber(j, "top_p", &err)) s.top_p = static_cast<float>(*v);
  if (auto v = GetInt32(j, "top_k", &err)) s.top_k = *v;
  auto max_tokens = GetInt(j, "max_tokens", &err);
  if (auto v = GetStrings(j, "stop_sequences", &err)) r.stop = *v;
  if (j.contains("metadata") && j["metadata"].is_object())
    if (auto v = GetString(j["metadata"], "user_id", &err)) r.routing.user = v->substr(0, 256);
  if (auto v = GetBool(j, "stream", &err)) p.stream = *v;
  if (!err.ok()) return err.error();
  if (!max_tokens) return BadRequest("'max_tokens' is required");
  if (*max_tokens < 1) return BadRequest("'max_tokens' must be at least 1");
  r.max_tokens = static_cast<int>(std::min<int64_t>(*max_tokens, INT32_MAX));
  if (*s.temperature < 0 || *s.temperature > 1) return BadRequest("'temperature' must be within [0, 1]");
  if (Status st = ParseConversation(j, &r); !st) return st.error();
  return p;
}

Result<backend::GenerationRequest> MessagesCodec::ParsePrompt(const json& j) const {
  backend::GenerationRequest r;
  auto model = RequireString(j, "model", "'model' is required");
  if (!model) return model.error();
  r.model = *model;
  if (Status st = ParseConversation(j, &r); !st) return st.error();
  return r;
}

std::string MessagesCodec::NewAnswerId() const { return NewId("msg", '_'); }

std::unique_ptr<StreamEncoder> MessagesCodec::NewStream(const Answer& a) const {
  return std::make_unique<Stream>(a);
}

json MessagesCodec::Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                              const backend::Usage& total) const {
  const CollectedChoice& c = choices.at(0);
  json content = json::array();
  if (!c.text.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
  for (const auto& call : c.tool_calls) {
    content.push_back({{"type", "tool_use"},
                       {"id", call.id},
                       {"name", call.name},
                       {"input", ArgumentsObject(call.arguments)}});
  }
  return {{"id", a.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", a.model},
          {"content", content},
          {"stop_reason", StopReason(c.result)},
          {"stop_sequence", StopSequence(c.result)},
          {"usage", UsageJson(total)}};
}

}  // namespace hone::api::anthropic
