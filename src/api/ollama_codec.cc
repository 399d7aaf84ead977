#include "api/ollama_codec.h"

#include <cstdio>

#include "api/json_fields.h"
#include "api/messages.h"
#include "api/tools.h"

namespace hone::api::ollama {
namespace {

std::string NowRfc3339() { return Rfc3339(std::time(nullptr)); }

// Fields shared by chat and generate.
Status ParseOptions(const json& j, ParsedGeneration* p) {
  backend::GenerationRequest& r = p->request;
  auto model = RequireString(j, "model", "model is required");
  if (!model) return model.error();
  r.model = *model;
  Status err;
  p->stream = true;  // Ollama streams unless told not to
  if (auto v = GetBool(j, "stream", &err)) p->stream = *v;
  r.keep_alive_s = GetKeepAlive(j, &err);
  if (j.contains("options") && j["options"].is_object()) {
    const json& o = j["options"];
    if (auto v = GetInt32(o, "num_predict", &err)) r.max_tokens = *v;
    GetSampling(o, &r.sampling, &err);
    if (auto v = GetStrings(o, "stop", &err)) r.stop = *v;
    // num_ctx: a smaller context than the loaded one is served as is (no reload).
    (void)GetInt(o, "num_ctx", &err);
  }
  if (r.max_tokens == 0) r.max_tokens = -1;
  if (j.contains("format") && !j["format"].is_null()) {
    const json& f = j["format"];
    if (f.is_string() && f.get<std::string>() == "json") {
      r.format.type = backend::ResponseFormat::Type::kJsonObject;
    } else if (f.is_object()) {
      r.format = {backend::ResponseFormat::Type::kJsonSchema, f};
    } else if (!(f.is_string() && f.get<std::string>().empty())) {
      return BadRequest("format must be \"json\" or a JSON schema");
    }
  }
  return err;
}

}  // namespace

std::string Rfc3339(std::time_t t) {
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t Ns(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

json DetailsJson(const backend::ModelCard::Details& d) {
  char params[32];
  std::snprintf(params, sizeof params, "%.1fM", d.parameters / 1e6);
  return {{"format", "gguf"},
          {"family", d.family},
          {"families", {d.family}},
          {"parameter_size", params},
          {"quantization_level", d.quantization}};
}

Result<ParsedGeneration> GenerationCodec::Parse(const json& j) const {
  ParsedGeneration p;
  backend::GenerationRequest& r = p.request;
  if (Status s = ParseOptions(j, &p); !s) return s.error();
  if (chat_) {
    r.chat = true;
    if (j.contains("messages") && !j["messages"].is_null()) {
      auto messages = ParseMessages(j["messages"]);
      if (!messages) return messages.error();
      r.messages = std::move(*messages);
    }
    auto tools = ParseTools(j, "tools", ToolForm::kNested);
    if (!tools) return tools.error();
    r.tools = std::move(*tools);
    // Not Ollama's: OpenAI's tool_choice, read as an extension (Ollama ignores it).
    auto choice = ParseToolChoice(j, r.tools);
    if (!choice) return choice.error();
    r.tool_choice = *choice;
    p.load_only = r.messages.empty();
    return p;
  }
  Status err;
  auto prompt = GetString(j, "prompt", &err);
  auto system = GetString(j, "system", &err);
  auto raw = GetBool(j, "raw", &err);
  if (!err.ok()) return err.error();
  if (!prompt || prompt->empty()) {
    p.load_only = true;
  } else if (raw && *raw) {
    r.raw = true;
    r.prompts = {*prompt};
  } else {
    // Ollama applies the model's template to a generate prompt, as a user turn.
    r.chat = true;
    if (system) r.messages.push_back({"system", *system});
    r.messages.push_back({"user", *prompt});
  }
  return p;
}

json GenerationCodec::Piece(const std::string& model, const std::string& text, bool done) const {
  json j = {{"model", model}, {"created_at", NowRfc3339()}, {"done", done}};
  if (chat_)
    j["message"] = {{"role", "assistant"}, {"content", text}};
  else
    j["response"] = text;
  return j;
}

// Ollama's shape: arguments as an object, no id on the wire it reads.
json ToolCallsJson(const std::vector<backend::ToolCall>& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back(
        {{"id", calls[i].id},
         {"function",
          {{"index", i}, {"name", calls[i].name}, {"arguments", ArgumentsObject(calls[i].arguments)}}}});
  }
  return out;
}

json GenerationCodec::Final(const Answer& a, const std::string& text, const backend::ChoiceResult& r) const {
  json j = Piece(a.model, text, true);
  // Ollama reports a turn that called tools as "stop".
  j["done_reason"] =
      r.finish == backend::FinishReason::kToolCalls ? "stop" : backend::FinishReasonName(r.finish);
  j.update({{"total_duration", Ns(std::chrono::duration<double>(backend::Clock::now() - a.start).count())},
            {"load_duration", Ns(a.load_seconds)},
            // The whole prompt, cached or not, as Ollama counts since its
            // PR #5371; the cached part in the field Ollama's cloud reports.
            {"prompt_eval_count", r.usage.prompt_tokens},
            {"prompt_eval_cached_count", r.usage.cached_tokens},
            {"prompt_eval_duration", Ns(r.prompt_s)},
            {"eval_count", r.usage.completion_tokens},
            {"eval_duration", Ns(r.generation_s)}});
  return j;
}

namespace {

// NDJSON: a line per text piece, then the final statistics. Ollama streams a
// tool call whole, in a message of its own, once it is complete: the pieces
// are gathered here and sent when the choice ends.
class Stream final : public StreamEncoder {
 public:
  Stream(const GenerationCodec& codec, const Answer& a) : codec_(codec), a_(a) {}
  std::string Text(size_t, const std::string& text) override {
    return Dump(codec_.Piece(a_.model, text, false)) + "\n";
  }
  std::string ToolCall(size_t, const backend::ToolCallDelta& d) override {
    if (calls_.size() <= d.index) calls_.resize(d.index + 1);
    if (!d.id.empty()) calls_[d.index].id = d.id;
    if (!d.name.empty()) calls_[d.index].name = d.name;
    calls_[d.index].arguments += d.arguments;
    return "";
  }
  std::string ChoiceEnd(size_t, const backend::ChoiceResult& r) override {
    std::string out;
    if (!calls_.empty()) {
      json j = codec_.Piece(a_.model, "", false);
      if (j.contains("message")) j["message"]["tool_calls"] = ToolCallsJson(calls_);
      out = Dump(j) + "\n";
    }
    return out + Dump(codec_.Final(a_, "", r)) + "\n";
  }
  std::string End(const backend::Usage&) override { return ""; }
  std::string Failure(const Error& e) override { return Dump(json{{"error", e.message}}) + "\n"; }

 private:
  const GenerationCodec& codec_;
  const Answer a_;
  std::vector<backend::ToolCall> calls_;
};

}  // namespace

std::unique_ptr<StreamEncoder> GenerationCodec::NewStream(const Answer& a) const {
  return std::make_unique<Stream>(*this, a);
}

json GenerationCodec::Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                                const backend::Usage&) const {
  json j = Final(a, choices.at(0).text, choices.at(0).result);
  if (chat_ && !choices.at(0).tool_calls.empty())
    j["message"]["tool_calls"] = ToolCallsJson(choices.at(0).tool_calls);
  return j;
}

json GenerationCodec::Loaded(const std::string& model, bool unloaded) const {
  json j = {{"model", model},
            {"created_at", NowRfc3339()},
            {"done", true},
            {"done_reason", unloaded ? "unload" : "load"}};
  if (chat_)
    j["message"] = {{"role", "assistant"}, {"content", ""}};
  else
    j["response"] = "";
  return j;
}

Result<backend::EmbeddingRequest> EmbeddingCodec::Parse(const json& j) const {
  Status err;
  auto model = GetString(j, "model", &err);
  if (legacy_) {
    auto prompt = GetString(j, "prompt", &err);
    if (!err.ok()) return err.error();
    if (!model || !prompt) return BadRequest("model and prompt are required");
    Status ignored;  // as Ollama: a keep_alive it cannot read is left out
    return backend::EmbeddingRequest{*model, {*prompt}, GetKeepAlive(j, &ignored)};
  }
  auto input = GetStrings(j, "input", &err);
  auto keep_alive = GetKeepAlive(j, &err);
  if (!err.ok()) return err.error();
  if (!model) return BadRequest("model is required");
  if (!input || input->empty()) return BadRequest("input is required");
  return backend::EmbeddingRequest{*model, std::move(*input), keep_alive};
}

json EmbeddingCodec::Encode(const json&, const backend::Embeddings& e, double seconds) const {
  if (legacy_) return {{"embedding", e.vectors.at(0)}};
  return {{"model", e.model},
          {"embeddings", e.vectors},
          {"total_duration", Ns(seconds)},
          {"load_duration", Ns(e.load_seconds)},
          {"prompt_eval_count", e.prompt_tokens}};
}

json ModelListCodec::Encode(const std::vector<backend::ModelCard>& models) const {
  json out = json::array();
  for (const auto& m : models) {
    out.push_back({{"name", m.name},
                   {"model", m.name},
                   {"modified_at", Rfc3339(0)},
                   {"size", m.size_bytes},
                   {"digest", ""},
                   {"details", m.details ? DetailsJson(*m.details) : json::object()}});
  }
  return {{"models", out}};
}

}  // namespace hone::api::ollama
