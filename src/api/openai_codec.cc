#include "api/openai_codec.h"

#include "api/json_fields.h"
#include "api/messages.h"
#include "api/tools.h"

namespace hone::api::openai {
namespace {

// Fields shared by chat and completions.
Status ParseCommon(const json& j, ParsedGeneration* p) {
  backend::GenerationRequest& r = p->request;
  auto model = RequireString(j, "model", "'model' is required");
  if (!model) return model.error();
  r.model = *model;
  Status err;
  backend::Sampling& s = r.sampling;
  // OpenAI's defaults: plain temperature sampling over the whole distribution.
  s.temperature = 1.0f, s.top_p = 1.0f, s.top_k = 0, s.min_p = 0.0f;
  GetSampling(j, &s, &err);  // top_k, min_p and repeat_penalty are llama.cpp extensions here
  if (auto v = GetInt32(j, "max_tokens", &err)) r.max_tokens = *v;
  if (auto v = GetInt32(j, "max_completion_tokens", &err)) r.max_tokens = *v;
  if (auto v = GetStrings(j, "stop", &err)) r.stop = *v;
  if (auto v = GetString(j, "user", &err)) r.routing.user = v->substr(0, 256);
  if (auto v = GetString(j, "cache_salt", &err)) r.cache_salt = *v;  // vLLM's: who may share cached prefixes
  if (auto v = GetBool(j, "stream", &err)) p->stream = *v;
  if (auto v = GetInt(j, "n", &err); v && *v != 1) err = BadRequest("only n = 1 is supported");
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    if (auto v = GetBool(j["stream_options"], "include_usage", &err)) p->include_usage = *v;
    if (auto v = GetBool(j["stream_options"], "include_route", &err)) p->include_route = *v;
  }
  if (!err.ok()) return err;
  if (r.max_tokens == 0 || r.max_tokens < -1) return BadRequest("'max_tokens' must be at least 1");
  if (*s.temperature < 0 || *s.temperature > 2) return BadRequest("'temperature' must be within [0, 2]");
  return Status::Ok();
}

Status ParseResponseFormat(const json& j, backend::ResponseFormat* out) {
  if (!j.contains("response_format") || j["response_format"].is_null()) return Status::Ok();
  const json& f = j["response_format"];
  std::string type =
      f.is_object() && f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
  if (type == "text") return Status::Ok();
  if (type == "json_object") {
    out->type = backend::ResponseFormat::Type::kJsonObject;
    return Status::Ok();
  }
  if (type == "json_schema") {
    if (!f.contains("json_schema") || !f["json_schema"].is_object() || !f["json_schema"].contains("schema")) {
      return BadRequest("'response_format.json_schema.schema' is required");
    }
    out->type = backend::ResponseFormat::Type::kJsonSchema;
    out->schema = f["json_schema"]["schema"];
    return Status::Ok();
  }
  return BadRequest("'response_format.type' must be text, json_object or json_schema");
}

json UsageJson(const backend::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string Event(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace

Result<ParsedGeneration> GenerationCodec::Parse(const json& j) const {
  ParsedGeneration p;
  backend::GenerationRequest& r = p.request;
  r.chat = chat_;
  if (!chat_) r.max_tokens = 16;  // OpenAI's default for completions
  if (Status s = ParseCommon(j, &p); !s) return s.error();
  if (chat_) {
    Status err_cont;
    if (Status s = ParseResponseFormat(j, &r.format); !s) return s.error();
    if (!j.contains("messages")) return BadRequest("'messages' must be an array");
    auto messages = ParseMessages(j["messages"]);
    if (!messages) return messages.error();
    r.messages = std::move(*messages);
    auto cont = GetBool(j, "continue_final_message", &err_cont);
    if (!err_cont.ok()) return err_cont.error();
    r.continue_final = cont.value_or(false);
    auto tools = ParseTools(j, "tools", ToolForm::kNested);
    if (!tools) return tools.error();
    r.tools = std::move(*tools);
    auto choice = ParseToolChoice(j, r.tools);
    if (!choice) return choice.error();
    r.tool_choice = *choice;
    if (auto v = GetBool(j, "parallel_tool_calls", &err_cont)) r.parallel_tool_calls = *v;
    if (!err_cont.ok()) return err_cont.error();
    if (r.continue_final && (r.messages.empty() || r.messages.back().role != "assistant"))
      return BadRequest("'continue_final_message' needs the last message to be the assistant's");
    return p;
  }
  Status err;
  auto prompts = GetStrings(j, "prompt", &err);
  if (!err.ok()) return err.error();
  if (!prompts || prompts->empty())
    return BadRequest("'prompt' is required (a string or an array of strings)");
  r.prompts = std::move(*prompts);
  return p;
}

std::string GenerationCodec::NewAnswerId() const { return NewId(chat_ ? "chatcmpl" : "cmpl"); }

namespace {

// One streamed answer: "data: {chunk}" events, then usage if asked, then [DONE].
class Stream final : public StreamEncoder {
 public:
  Stream(const Answer& a, bool chat, ApiFlavor flavor) : a_(a), chat_(chat), flavor_(flavor) {}

  std::string ChoiceStart(size_t choice) override {
    return chat_ ? Chunk(choice, json{{"role", "assistant"}, {"content", ""}}, nullptr) : "";
  }
  std::string Text(size_t choice, const std::string& text) override {
    return Chunk(choice, chat_ ? json{{"content", text}} : json(text), nullptr);
  }
  // OpenAI's shape: the first piece of a call carries id, type and name with
  // empty arguments; later pieces carry only index and more arguments.
  std::string ToolCall(size_t choice, const backend::ToolCallDelta& d) override {
    if (!chat_) return "";
    json call = {{"index", d.index}};
    json fn = {{"arguments", d.arguments}};
    if (!d.name.empty()) {
      call["id"] = d.id;
      call["type"] = "function";
      fn["name"] = d.name;
    }
    call["function"] = fn;
    return Chunk(choice, json{{"tool_calls", json::array({call})}}, nullptr);
  }
  std::string ChoiceEnd(size_t choice, const backend::ChoiceResult& r) override {
    const bool route = a_.include_route && !r.route.empty();
    return Chunk(choice, chat_ ? json::object() : json(""), backend::FinishReasonName(r.finish),
                 route ? &r.route : nullptr);
  }
  std::string End(const backend::Usage& total) override {
    std::string out;
    if (a_.include_usage) {
      out = Event({{"id", a_.id},
                   {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                   {"created", a_.created},
                   {"model", a_.model},
                   {"choices", json::array()},
                   {"usage", UsageJson(total)}});
    }
    return out + "data: [DONE]\n\n";
  }
  std::string Failure(const Error& e) override {
    HttpError h = ToHttpError(e, flavor_);
    return Event({{"error", {{"message", h.message}, {"type", h.type}, {"code", h.code}}}});
  }

 private:
  // `route`: hone's stream_options.include_route, on a choice's last chunk only
  // (not a per-token cost).
  std::string Chunk(size_t choice, json delta_or_text, json finish,
                    const std::string* route = nullptr) const {
    json c = {{"index", choice}, {"finish_reason", std::move(finish)}, {"logprobs", nullptr}};
    c[chat_ ? "delta" : "text"] = std::move(delta_or_text);
    json j = {{"id", a_.id},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", a_.created},
              {"model", a_.model},
              {"choices", {c}}};
    if (a_.include_usage) j["usage"] = nullptr;
    if (route) j["hone_route"] = *route;
    return Event(j);
  }
  const Answer a_;
  const bool chat_;
  const ApiFlavor flavor_;
};

}  // namespace

std::unique_ptr<StreamEncoder> GenerationCodec::NewStream(const Answer& a) const {
  return std::make_unique<Stream>(a, chat_, flavor());
}

json ToolCallsJson(const std::vector<backend::ToolCall>& calls) {
  json out = json::array();
  for (const auto& c : calls) {
    out.push_back(
        {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

json GenerationCodec::Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                                const backend::Usage& total) const {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json c = {{"index", i},
              {"finish_reason", backend::FinishReasonName(choices[i].result.finish)},
              {"logprobs", nullptr}};
    if (chat_) {
      c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
      // As OpenAI answers a call: content null when the model wrote none.
      if (!choices[i].tool_calls.empty()) {
        c["message"]["tool_calls"] = ToolCallsJson(choices[i].tool_calls);
        if (choices[i].text.empty()) c["message"]["content"] = nullptr;
      }
    } else
      c["text"] = choices[i].text;
    out.push_back(c);
  }
  return {{"id", a.id},           {"object", chat_ ? "chat.completion" : "text_completion"},
          {"created", a.created}, {"model", a.model},
          {"choices", out},       {"usage", UsageJson(total)}};
}

Result<backend::EmbeddingRequest> EmbeddingCodec::Parse(const json& j) const {
  Status err;
  auto model = GetString(j, "model", &err);
  auto input = GetStrings(j, "input", &err);
  if (!err.ok()) return err.error();
  if (!model) return BadRequest("'model' is required");
  if (!input || input->empty()) return BadRequest("'input' is required (a string or an array of strings)");
  return backend::EmbeddingRequest{*model, std::move(*input), std::nullopt};
}

json EmbeddingCodec::Encode(const json& body, const backend::Embeddings& e, double) const {
  Status ignored;
  auto format = GetString(body, "encoding_format", &ignored);
  const bool base64 = format && *format == "base64";
  json data = json::array();
  for (size_t i = 0; i < e.vectors.size(); ++i) {
    // The official clients ask for base64: little-endian float32 bytes.
    const auto& v = e.vectors[i];
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", base64 ? json(Base64(v.data(), v.size() * sizeof(float))) : json(v)}});
  }
  return {{"object", "list"},
          {"data", data},
          {"model", e.model},
          {"usage", {{"prompt_tokens", e.prompt_tokens}, {"total_tokens", e.prompt_tokens}}}};
}

json ModelListCodec::Encode(const std::vector<backend::ModelCard>& models) const {
  json data = json::array();
  for (const auto& m : models) {
    data.push_back({{"id", m.name}, {"object", "model"}, {"created", 0}, {"owned_by", "hone"}});
  }
  return {{"object", "list"}, {"data", data}};
}

}  // namespace hone::api::openai
