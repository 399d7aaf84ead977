#include "serve/openai_api.h"

#include "serve/api_common.h"
#include "serve/json_grammar.h"

namespace hone::serve::openai {
namespace {

constexpr ApiFlavor kFlavor = ApiFlavor::kOpenAI;

HttpResponse Fail(const ApiError& e) { return ErrorResponse(e, kFlavor); }

// Fields shared by chat and completions. Returns false with *err set.
bool ParseCommon(const json& j, GenRequest* r, ApiError* err) {
  auto model = GetString(j, "model", err);
  if (!err->message.empty()) return false;
  if (!model) return *err = BadRequest("'model' is required"), false;
  r->model = *model;
  engine::SamplingOptions& s = r->sampling;
  // OpenAI's defaults: plain temperature sampling over the whole distribution.
  s.temperature = 1.0f, s.top_p = 1.0f, s.top_k = 0, s.min_p = 0.0f;
  GetSampling(j, &s, err);  // top_k, min_p and repeat_penalty are llama.cpp extensions here
  if (auto v = GetInt(j, "max_tokens", err)) r->max_tokens = static_cast<int>(*v);
  if (auto v = GetInt(j, "max_completion_tokens", err)) r->max_tokens = static_cast<int>(*v);
  if (auto v = GetStrings(j, "stop", err)) r->stop = *v;
  if (auto v = GetBool(j, "stream", err)) r->stream = *v;
  if (auto v = GetInt(j, "n", err); v && *v != 1) *err = BadRequest("only n = 1 is supported");
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    if (auto v = GetBool(j["stream_options"], "include_usage", err)) r->include_usage = *v;
  }
  if (!err->message.empty()) return false;
  if (r->max_tokens == 0) return *err = BadRequest("'max_tokens' must be at least 1"), false;
  if (s.temperature < 0 || s.temperature > 2)
    return *err = BadRequest("'temperature' must be within [0, 2]"), false;
  return true;
}

bool ParseResponseFormat(const json& j, GenRequest* r, ApiError* err) {
  if (!j.contains("response_format") || j["response_format"].is_null()) return true;
  const json& f = j["response_format"];
  std::string type =
      f.is_object() && f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
  if (type == "text") return true;
  if (type == "json_object") {
    r->sampling.grammar = JsonObjectGrammar();
    return true;
  }
  if (type == "json_schema") {
    const json* schema = nullptr;
    if (f.contains("json_schema") && f["json_schema"].is_object() && f["json_schema"].contains("schema")) {
      schema = &f["json_schema"]["schema"];
    }
    if (!schema) return *err = BadRequest("'response_format.json_schema.schema' is required"), false;
    auto g = JsonSchemaGrammar(*schema);
    if (!g) return *err = FromError(g.error()), false;
    r->sampling.grammar = *g;
    return true;
  }
  *err = BadRequest("'response_format.type' must be text, json_object or json_schema");
  return false;
}

json Usage(const JobResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

bool Failed(const JobResult& r) { return r.finish != Finish::kStop && r.finish != Finish::kLength; }

ApiError JobError(const JobResult& r) {
  if (r.finish == Finish::kTimeout) return FromError(MakeError(ErrorCode::kAborted, r.error));
  return FromError(MakeError(ErrorCode::kInternal, r.error.empty() ? "generation was cancelled" : r.error));
}

// Runs the request; chat and completions differ only in how a choice looks.
HttpResponse Generate(Service& svc, const GenRequest& gr, bool chat) {
  ApiError err;
  auto run = svc.Start(gr, kFlavor, &err);
  if (!run) return Fail(err);
  const std::string id = NewId(chat ? "chatcmpl" : "cmpl");
  const int64_t created = UnixNow();
  const char* object = chat ? "chat.completion" : "text_completion";
  if (!gr.stream) {
    HttpResponse res;
    json choices = json::array();
    JobResult total;
    for (size_t i = 0; i < run->jobs.size(); ++i) {
      std::string text = WaitForJob(*run, i);
      JobResult r = run->jobs[i]->result();
      LogJob(*run, r, &res.log);
      if (r.finish == Finish::kCancelled && run->client_gone()) return ClientClosed(res.log);
      if (Failed(r)) return Fail(JobError(r));
      json c = {{"index", i}, {"finish_reason", FinishName(r.finish)}, {"logprobs", nullptr}};
      if (chat)
        c["message"] = {{"role", "assistant"}, {"content", text}};
      else
        c["text"] = text;
      choices.push_back(c);
      total.prompt_tokens += r.prompt_tokens, total.completion_tokens += r.completion_tokens;
      total.cached_tokens += r.cached_tokens;
    }
    res.body = Dump(json{{"id", id},
                         {"object", object},
                         {"created", created},
                         {"model", run->model},
                         {"choices", choices},
                         {"usage", Usage(total)}});
    return res;
  }
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.headers["Cache-Control"] = "no-cache";
  res.stream = [run, id, created, chat, include_usage = gr.include_usage](const ChunkWriter& write,
                                                                          RequestLog* log) {
    const std::string object = chat ? "chat.completion.chunk" : "text_completion";
    auto chunk = [&](size_t i, json delta_or_text, json finish) {
      json c = {{"index", i}, {"finish_reason", finish}, {"logprobs", nullptr}};
      if (chat)
        c["delta"] = std::move(delta_or_text);
      else
        c["text"] = std::move(delta_or_text);
      json j = {
          {"id", id}, {"object", object}, {"created", created}, {"model", run->model}, {"choices", {c}}};
      if (include_usage) j["usage"] = nullptr;
      return "data: " + Dump(j) + "\n\n";
    };
    JobResult total;
    for (size_t i = 0; i < run->jobs.size(); ++i) {
      if (chat && !write(chunk(i, json{{"role", "assistant"}, {"content", ""}}, nullptr))) {
        run->jobs[i]->Cancel();
        run->jobs[i]->WaitAll();
        LogJob(*run, run->jobs[i]->result(), log);
        return;
      }
      auto frame = [&](const std::string& text) {
        return chunk(i, chat ? json{{"content", text}} : json(text), nullptr);
      };
      bool connected = PumpJob(*run, i, write, frame);
      JobResult r = run->jobs[i]->result();
      LogJob(*run, r, log);
      if (!connected) return;
      if (Failed(r)) {
        ApiError e = JobError(r);
        write("data: " + Dump(json{{"error", {{"message", e.message}, {"type", e.type}, {"code", e.code}}}}) +
              "\n\n");
        return;
      }
      if (!write(chunk(i, chat ? json::object() : json(""), FinishName(r.finish)))) return;
      total.prompt_tokens += r.prompt_tokens, total.completion_tokens += r.completion_tokens;
      total.cached_tokens += r.cached_tokens;
    }
    if (include_usage) {
      json j = {{"id", id},
                {"object", object},
                {"created", created},
                {"model", run->model},
                {"choices", json::array()},
                {"usage", Usage(total)}};
      if (!write("data: " + Dump(j) + "\n\n")) return;
    }
    write("data: [DONE]\n\n");
  };
  return res;
}

}  // namespace

HttpResponse Models(Service& svc) {
  json data = json::array();
  for (const auto& e : svc.pool().registry().entries()) {
    data.push_back({{"id", e.name}, {"object", "model"}, {"created", 0}, {"owned_by", "hone"}});
    for (const auto& a : e.aliases)
      data.push_back({{"id", a}, {"object", "model"}, {"created", 0}, {"owned_by", "hone"}});
  }
  HttpResponse r;
  r.body = Dump(json{{"object", "list"}, {"data", data}});
  return r;
}

HttpResponse ChatCompletions(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  GenRequest gr;
  gr.client_gone = req.client_gone;
  gr.chat = true;
  if (!ParseCommon(*j, &gr, &err) || !ParseResponseFormat(*j, &gr, &err)) return Fail(err);
  if (!j->contains("messages") || !(*j)["messages"].is_array())
    return Fail(BadRequest("'messages' must be an array"));
  for (const auto& m : (*j)["messages"]) {
    if (!m.is_object()) return Fail(BadRequest("each message must be an object"));
    auto role = GetString(m, "role", &err);
    if (!role) return Fail(err.message.empty() ? BadRequest("each message needs a 'role'") : err);
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer" &&
        *role != "tool") {
      return Fail(BadRequest("unknown message role '" + *role + "'"));
    }
    std::string content;
    if (m.contains("content") && m["content"].is_string()) {
      content = m["content"].get<std::string>();
    } else if (m.contains("content") && m["content"].is_array()) {
      // Content parts: the text ones, joined (images are not supported).
      for (const auto& part : m["content"]) {
        if (part.is_object() && part.value("type", "") == "text") content += part.value("text", "");
      }
    }
    gr.messages.push_back({*role == "developer" ? "system" : *role, content});
  }
  return Generate(svc, gr, /*chat=*/true);
}

HttpResponse Completions(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  GenRequest gr;
  gr.client_gone = req.client_gone;
  gr.max_tokens = 16;  // OpenAI's default for completions
  if (!ParseCommon(*j, &gr, &err)) return Fail(err);
  auto prompts = GetStrings(*j, "prompt", &err);
  if (!err.message.empty()) return Fail(err);
  if (!prompts || prompts->empty())
    return Fail(BadRequest("'prompt' is required (a string or an array of strings)"));
  gr.prompts = *prompts;
  return Generate(svc, gr, /*chat=*/false);
}

HttpResponse Embeddings(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  auto model = GetString(*j, "model", &err);
  auto input = GetStrings(*j, "input", &err);
  if (!err.message.empty()) return Fail(err);
  if (!model) return Fail(BadRequest("'model' is required"));
  if (!input || input->empty())
    return Fail(BadRequest("'input' is required (a string or an array of strings)"));
  auto lease = svc.pool().Acquire(*model);
  if (!lease) return Fail(FromError(lease.error()));
  auto emb = (**lease)->Embed(*input, svc.threads());
  if (!emb) return Fail(FromError(emb.error()));
  auto format = GetString(*j, "encoding_format", &err);
  bool base64 = format && *format == "base64";
  json data = json::array();
  for (size_t i = 0; i < emb->vectors.size(); ++i) {
    // The official clients ask for base64: little-endian float32 bytes.
    json v = base64 ? json(Base64(emb->vectors[i].data(), emb->vectors[i].size() * sizeof(float)))
                    : json(emb->vectors[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", v}});
  }
  HttpResponse r;
  r.log.model = (**lease)->name;
  r.log.prompt_tokens = emb->n_tokens;
  r.body = Dump(json{{"object", "list"},
                     {"data", data},
                     {"model", (**lease)->name},
                     {"usage", {{"prompt_tokens", emb->n_tokens}, {"total_tokens", emb->n_tokens}}}});
  return r;
}

}  // namespace hone::serve::openai
