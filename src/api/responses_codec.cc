#include "api/responses_codec.h"

#include "api/json_fields.h"
#include "api/tools.h"

namespace hone::api::responses {
namespace {

// A message item's content (or a call's output) at `where`: a string, or
// part objects whose text is joined.
Result<std::string> ContentText(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return BadRequest("'" + where + "' must be a string or an array of parts");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string at = Indexed(where, i);
    if (!part.is_object()) return BadRequest("'" + at + "' must be an object");
    Status err;
    auto type = GetStringAt(part, at, "type", &err);
    if (!err.ok()) return err.error();
    if (!type) return BadRequest("'" + at + ".type' is required");
    if (*type != "input_text" && *type != "output_text" && *type != "text") {
      return BadRequest("'" + at + ".type' '" + *type + "' is not supported; this server reads text only");
    }
    auto t = GetStringAt(part, at, "text", &err);
    if (!err.ok()) return err.error();
    if (!t) return BadRequest("'" + at + ".text' is required");
    text += *t;
  }
  return text;
}

Status AddItems(const json& input, std::vector<backend::Message>* out) {
  if (input.is_string()) {
    out->emplace_back("user", input.get<std::string>());
    return Status::Ok();
  }
  if (!input.is_array()) return BadRequest("'input' must be a string or an array of items");
  if (input.size() > kMaxMessages) {
    return BadRequest("'input' has more than " + std::to_string(kMaxMessages) + " items");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return BadRequest("'" + where + "' must be an object");
    Status err;
    const std::string type = GetStringAt(item, where, "type", &err).value_or("message");
    const std::string role = GetStringAt(item, where, "role", &err).value_or("");
    if (!err.ok()) return err;
    if (type == "message") {
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        return BadRequest("'" + where + ".role' must be user, assistant, system or developer");
      }
      auto text = ContentText(item.contains("content") ? item["content"] : json(""), where + ".content");
      if (!text) return text.error();
      out->emplace_back(role == "developer" ? "system" : role, *text);
    } else if (type == "function_call") {
      if (!item.contains("call_id") || !item["call_id"].is_string() || !item.contains("name") ||
          !item["name"].is_string()) {
        return BadRequest("'" + where + "' needs a 'call_id' and a 'name'");
      }
      auto args =
          ArgumentsText(item.contains("arguments") ? item["arguments"] : json(), where + ".arguments");
      if (!args) return args.error();
      // Calls of one turn join the assistant message before them.
      if (out->empty() || out->back().role != "assistant") out->emplace_back("assistant", "");
      out->back().tool_calls.push_back(
          {item["call_id"].get<std::string>(), item["name"].get<std::string>(), *args});
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string()) {
        return BadRequest("'" + where + ".call_id' is required");
      }
      const json& o = item.contains("output") ? item["output"] : json("");
      auto text =
          o.is_string() ? Result<std::string>(o.get<std::string>()) : ContentText(o, where + ".output");
      if (!text) return text.error();
      backend::Message m("tool", *text);
      m.tool_call_id = item["call_id"].get<std::string>();
      out->push_back(std::move(m));
    } else if (type == "reasoning") {
      continue;  // an earlier answer's reasoning: not part of the prompt
    } else {
      return BadRequest("'" + where + ".type' '" + type + "' is not an input item this server reads");
    }
  }
  return Status::Ok();
}

Status ParseTextFormat(const json& j, backend::ResponseFormat* out) {
  if (!j.contains("text") || !j["text"].is_object() || !j["text"].contains("format")) return Status::Ok();
  const json& f = j["text"]["format"];
  const std::string type = f.is_object() ? StringOr(f, "type") : "";
  if (type == "text") return Status::Ok();
  if (type == "json_object") return out->type = backend::ResponseFormat::Type::kJsonObject, Status::Ok();
  if (type == "json_schema") {
    if (!f.contains("schema") || !f["schema"].is_object())
      return BadRequest("'text.format.schema' is required");
    *out = {backend::ResponseFormat::Type::kJsonSchema, f["schema"]};
    return Status::Ok();
  }
  return BadRequest("'text.format.type' must be text, json_object or json_schema");
}

json UsageJson(const backend::Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json MessageItem(const std::string& id, const std::string& text, const char* status) {
  json content = json::array();
  if (std::string(status) == "completed") {
    content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  }
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

json CallItem(const backend::ToolCall& c, const char* status) {
  return {{"type", "function_call"}, {"id", "fc_" + c.id},       {"call_id", c.id},
          {"name", c.name},          {"arguments", c.arguments}, {"status", status}};
}

// The response object, as the API returns it and as response.completed carries it.
json ResponseObject(const Answer& a, json output, const backend::ChoiceResult* r, const backend::Usage* usage) {
  json j = {{"id", a.id},
            {"object", "response"},
            {"created_at", a.created},
            {"model", a.model},
            {"output", std::move(output)},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"store", false}};
  j.update(a.echo);
  if (!r) {
    j["status"] = "in_progress";
    j["usage"] = nullptr;
    return j;
  }
  const bool cut = r->finish == backend::FinishReason::kLength;
  j["status"] = cut ? "incomplete" : "completed";
  if (cut) j["incomplete_details"] = {{"reason", "max_output_tokens"}};
  j["usage"] = UsageJson(usage ? *usage : r->usage);
  return j;
}

// One streamed response: a message item opens on the first text, a
// function_call item on each call's first piece; every event carries a
// sequence number.
class Stream final : public StreamEncoder {
 public:
  explicit Stream(const Answer& a) : a_(a) {}
  std::string Begin() override {
    json resp = ResponseObject(a_, json::array(), nullptr, nullptr);
    std::string out = Event("response.created", {{"response", resp}});  // two statements: in order
    return out + Event("response.in_progress", {{"response", resp}});
  }
  std::string Text(size_t, const std::string& text) override {
    std::string out;
    if (open_ != Item::kMessage) {
      out += Close();
      message_id_ = NewId("msg", '_');
      text_.clear();
      out += Event("response.output_item.added",
                   {{"output_index", output_.size()}, {"item", MessageItem(message_id_, "", "in_progress")}});
      out += Event("response.content_part.added",
                   {{"item_id", message_id_},
                    {"output_index", output_.size()},
                    {"content_index", 0},
                    {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
      open_ = Item::kMessage;
    }
    text_ += text;
    return out + Event("response.output_text.delta", {{"item_id", message_id_},
                                                      {"output_index", output_.size()},
                                                      {"content_index", 0},
                                                      {"delta", text},
                                                      {"logprobs", json::array()}});
  }
  std::string ToolCall(size_t, const backend::ToolCallDelta& d) override {
    std::string out;
    if (!d.name.empty()) {
      out += Close();
      call_ = {d.id, d.name, ""};
      out += Event("response.output_item.added",
                   {{"output_index", output_.size()}, {"item", CallItem(call_, "in_progress")}});
      open_ = Item::kCall;
    }
    if (open_ == Item::kCall && !d.arguments.empty()) {
      call_.arguments += d.arguments;
      out += Event("response.function_call_arguments.delta",
                   {{"item_id", "fc_" + call_.id}, {"output_index", output_.size()}, {"delta", d.arguments}});
    }
    return out;
  }
  std::string ChoiceEnd(size_t, const backend::ChoiceResult& r) override {
    result_ = r;
    return Close();
  }
  std::string End(const backend::Usage& total) override {
    json resp = ResponseObject(a_, output_, &result_, &total);
    return Event(resp["status"] == "incomplete" ? "response.incomplete" : "response.completed",
                 {{"response", resp}});
  }
  std::string Failure(const Error& e) override {
    HttpError h = ToHttpError(e, ApiFlavor::kOpenAI);
    return Event("error", {{"code", h.code.empty() ? json(nullptr) : json(h.code)},
                           {"message", h.message},
                           {"param", nullptr}});
  }

 private:
  enum class Item { kNone, kMessage, kCall };
  std::string Event(const char* type, json data) {
    data["type"] = type;
    data["sequence_number"] = seq_++;
    return std::string("event: ") + type + "\ndata: " + Dump(data) + "\n\n";
  }
  // Ends the open item with its .done events and keeps it for the final response.
  std::string Close() {
    std::string out;
    const size_t at = output_.size();
    if (open_ == Item::kMessage) {
      out += Event("response.output_text.done", {{"item_id", message_id_},
                                                 {"output_index", at},
                                                 {"content_index", 0},
                                                 {"text", text_},
                                                 {"logprobs", json::array()}});
      out += Event("response.content_part.done",
                   {{"item_id", message_id_},
                    {"output_index", at},
                    {"content_index", 0},
                    {"part", {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}}}});
      output_.push_back(MessageItem(message_id_, text_, "completed"));
    } else if (open_ == Item::kCall) {
      out += Event("response.function_call_arguments.done", {{"item_id", "fc_" + call_.id},
                                                             {"output_index", at},
                                                             {"name", call_.name},
                                                             {"arguments", call_.arguments}});
      output_.push_back(CallItem(call_, "completed"));
    } else {
      return out;
    }
    out += Event("response.output_item.done", {{"output_index", at}, {"item", output_.back()}});
    open_ = Item::kNone;
    return out;
  }

  const Answer a_;
  int64_t seq_ = 0;
  Item open_ = Item::kNone;
  std::string message_id_, text_;
  backend::ToolCall call_;
  json output_ = json::array();  // the items closed so far
  backend::ChoiceResult result_;
};

}  // namespace

Result<ParsedGeneration> ResponsesCodec::Parse(const json& j) const {
  ParsedGeneration p;
  backend::GenerationRequest& r = p.request;
  r.chat = true;
  auto model = RequireString(j, "model", "'model' is required");
  if (!model) return model.error();
  r.model = *model;
  if (j.contains("previous_response_id") && !j["previous_response_id"].is_null()) {
    return BadRequest(
        "'previous_response_id' is not supported: this server stores no responses; send the whole "
        "conversation in 'input'");
  }
  Status err;
  backend::Sampling& s = r.sampling;
  s.temperature = 1.0f, s.top_p = 1.0f, s.top_k = 0, s.min_p = 0.0f;  // OpenAI's defaults
  if (auto v = GetNumber(j, "temperature", &err)) s.temperature = static_cast<float>(*v);
  if (auto v = GetNumber(j, "top_p", &err)) s.top_p = static_cast<float>(*v);
  auto max_output = GetInt(j, "max_output_tokens", &err);
  if (auto v = GetBool(j, "stream", &err)) p.stream = *v;
  if (auto v = GetBool(j, "parallel_tool_calls", &err)) r.parallel_tool_calls = *v;
  if (auto v = GetString(j, "user", &err)) r.routing.user = v->substr(0, 256);
  auto instructions = GetString(j, "instructions", &err);
  if (!err.ok()) return err.error();
  if (max_output) {
    if (*max_output < 1) return BadRequest("'max_output_tokens' must be at least 1");
    r.max_tokens = static_cast<int>(std::min<int64_t>(*max_output, INT32_MAX));
  }
  if (*s.temperature < 0 || *s.temperature > 2) return BadRequest("'temperature' must be within [0, 2]");
  if (instructions && !instructions->empty()) r.messages.emplace_back("system", *instructions);
  if (!j.contains("input")) return BadRequest("'input' is required (a string or an array of items)");
  if (Status st = AddItems(j["input"], &r.messages); !st) return st.error();
  if (r.messages.empty()) return BadRequest("'input' holds no message");
  if (Status st = ParseTextFormat(j, &r.format); !st) return st.error();
  if (j.contains("tools") && j["tools"].is_array()) {
    for (const auto& t : j["tools"]) {
      if (t.is_object() && StringOr(t, "type") != "function") {
        return BadRequest("only function tools are supported, not '" + StringOr(t, "type") + "'");
      }
    }
  }
  auto tools = ParseTools(j, "tools", ToolForm::kFlat);
  if (!tools) return tools.error();
  r.tools = std::move(*tools);
  auto choice = ParseToolChoice(j, r.tools);
  if (!choice) return choice.error();
  r.tool_choice = *choice;
  // What the response object repeats from the request.
  p.echo = {{"instructions", instructions ? json(*instructions) : json(nullptr)},
            {"max_output_tokens", j.contains("max_output_tokens") ? j["max_output_tokens"] : json(nullptr)},
            {"temperature", *s.temperature},
            {"top_p", *s.top_p},
            {"tools", j.contains("tools") && j["tools"].is_array() ? j["tools"] : json::array()},
            {"tool_choice", j.contains("tool_choice") ? j["tool_choice"] : json("auto")},
            {"parallel_tool_calls", r.parallel_tool_calls.value_or(false)},
            {"text",
             j.contains("text") && j["text"].is_object() ? j["text"] : json{{"format", {{"type", "text"}}}}}};
  return p;
}

std::string ResponsesCodec::NewAnswerId() const { return NewId("resp", '_'); }

std::unique_ptr<StreamEncoder> ResponsesCodec::NewStream(const Answer& a) const {
  return std::make_unique<Stream>(a);
}

json ResponsesCodec::Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                               const backend::Usage& total) const {
  const CollectedChoice& c = choices.at(0);
  json output = json::array();
  if (!c.text.empty() || c.tool_calls.empty())
    output.push_back(MessageItem(NewId("msg", '_'), c.text, "completed"));
  for (const auto& call : c.tool_calls) output.push_back(CallItem(call, "completed"));
  return ResponseObject(a, std::move(output), &c.result, &total);
}

}  // namespace hone::api::responses
