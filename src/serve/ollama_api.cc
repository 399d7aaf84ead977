#include "serve/ollama_api.h"

#include <ctime>

#include "serve/api_common.h"
#include "serve/json_grammar.h"

namespace hone::serve::ollama {
namespace {

constexpr ApiFlavor kFlavor = ApiFlavor::kOllama;
HttpResponse Fail(const ApiError& e) { return ErrorResponse(e, kFlavor); }

std::string Rfc3339(std::time_t t) {
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}
std::string NowRfc3339() { return Rfc3339(std::time(nullptr)); }
int64_t Ns(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

bool ParseOptions(const json& j, GenRequest* r, ApiError* err) {
  auto model = GetString(j, "model", err);
  if (!err->message.empty()) return false;
  if (!model) return *err = BadRequest("model is required"), false;
  r->model = *model;
  r->stream = true;  // Ollama streams unless told not to
  if (auto v = GetBool(j, "stream", err)) r->stream = *v;
  r->keep_alive_s = GetKeepAlive(j, err);
  if (j.contains("options") && j["options"].is_object()) {
    const json& o = j["options"];
    if (auto v = GetInt(o, "num_predict", err)) r->max_tokens = static_cast<int>(*v);
    GetSampling(o, &r->sampling, err);
    if (auto v = GetStrings(o, "stop", err)) r->stop = *v;
    // num_ctx: a smaller context than the loaded one is served as is (no reload).
    GetInt(o, "num_ctx", err);
  }
  if (r->max_tokens == 0) r->max_tokens = -1;
  if (j.contains("format") && !j["format"].is_null()) {
    const json& f = j["format"];
    if (f.is_string() && f.get<std::string>() == "json") {
      r->sampling.grammar = JsonObjectGrammar();
    } else if (f.is_object()) {
      auto g = JsonSchemaGrammar(f);
      if (!g) return *err = FromError(g.error()), false;
      r->sampling.grammar = *g;
    } else if (!(f.is_string() && f.get<std::string>().empty())) {
      return *err = BadRequest("format must be \"json\" or a JSON schema"), false;
    }
  }
  return err->message.empty();
}

json Stats(const Running& run, const JobResult& r) {
  return {{"total_duration", Ns(std::chrono::duration<double>(Clock::now() - run.start).count())},
          {"load_duration", Ns(run.load_seconds)},
          {"prompt_eval_count", r.prompt_tokens},
          {"prompt_eval_duration", Ns(r.timings.prompt_seconds())},
          {"eval_count", r.completion_tokens},
          {"eval_duration", Ns(r.timings.gen_seconds())}};
}

// An empty prompt only loads the model (or unloads it with keep_alive 0).
HttpResponse LoadOnly(Service& svc, const GenRequest& gr, bool chat) {
  auto lease = svc.pool().Acquire(gr.model, gr.keep_alive_s);
  if (!lease) return Fail(FromError(lease.error()));
  std::string name = (**lease)->name;
  lease->reset();
  std::string reason = "load";
  if (gr.keep_alive_s && *gr.keep_alive_s == 0) {
    (void)svc.pool().Unload(name);
    reason = "unload";
  }
  json j = {{"model", name}, {"created_at", NowRfc3339()}, {"done", true}, {"done_reason", reason}};
  if (chat)
    j["message"] = {{"role", "assistant"}, {"content", ""}};
  else
    j["response"] = "";
  HttpResponse r;
  r.log.model = name;
  r.body = Dump(j);
  return r;
}

HttpResponse Run(Service& svc, const GenRequest& gr, bool chat) {
  ApiError err;
  auto run = svc.Start(gr, kFlavor, &err);
  if (!run) return Fail(err);
  auto piece = [run, chat](const std::string& text, bool done) {
    json j = {{"model", run->model}, {"created_at", NowRfc3339()}, {"done", done}};
    if (chat)
      j["message"] = {{"role", "assistant"}, {"content", text}};
    else
      j["response"] = text;
    return j;
  };
  auto final_piece = [run, piece](const std::string& text, const JobResult& r) {
    json j = piece(text, true);
    j["done_reason"] = FinishName(r.finish);
    j.update(Stats(*run, r));
    return j;
  };
  auto job_error = [](const JobResult& r) {
    return FromError(MakeError(r.finish == Finish::kTimeout ? ErrorCode::kAborted : ErrorCode::kInternal,
                               r.error.empty() ? "generation was cancelled" : r.error));
  };
  if (!gr.stream) {
    std::string text = WaitForJob(*run, 0);
    JobResult r = run->jobs[0]->result();
    HttpResponse res;
    LogJob(*run, r, &res.log);
    if (r.finish == Finish::kCancelled && run->client_gone()) return ClientClosed(res.log);
    if (r.finish != Finish::kStop && r.finish != Finish::kLength) return Fail(job_error(r));
    res.body = Dump(final_piece(text, r));
    return res;
  }
  HttpResponse res;
  res.content_type = "application/x-ndjson";
  res.stream = [run, piece, final_piece, job_error](const ChunkWriter& write, RequestLog* log) {
    auto frame = [&](const std::string& text) { return Dump(piece(text, false)) + "\n"; };
    bool connected = PumpJob(*run, 0, write, frame);
    JobResult r = run->jobs[0]->result();
    LogJob(*run, r, log);
    if (!connected) return;
    if (r.finish != Finish::kStop && r.finish != Finish::kLength) {
      write(Dump(json{{"error", job_error(r).message}}) + "\n");
      return;
    }
    write(Dump(final_piece("", r)) + "\n");
  };
  return res;
}

json Details(const engine::ModelInfo& info) {
  char params[32];
  std::snprintf(params, sizeof params, "%.1fM", info.n_params / 1e6);
  return {{"format", "gguf"},
          {"family", info.architecture},
          {"families", {info.architecture}},
          {"parameter_size", params},
          {"quantization_level", info.file_type}};
}

}  // namespace

HttpResponse Generate(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  GenRequest gr;
  gr.client_gone = req.client_gone;
  if (!ParseOptions(*j, &gr, &err)) return Fail(err);
  auto prompt = GetString(*j, "prompt", &err);
  auto system = GetString(*j, "system", &err);
  auto raw = GetBool(*j, "raw", &err);
  if (!err.message.empty()) return Fail(err);
  if (!prompt || prompt->empty()) return LoadOnly(svc, gr, false);
  if (raw && *raw) {
    gr.raw = true;
    gr.prompts = {*prompt};
  } else {
    // Ollama applies the model's template to a generate prompt, as a user turn.
    gr.chat = true;
    if (system) gr.messages.push_back({"system", *system});
    gr.messages.push_back({"user", *prompt});
  }
  return Run(svc, gr, false);
}

HttpResponse Chat(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  GenRequest gr;
  gr.client_gone = req.client_gone;
  gr.chat = true;
  if (!ParseOptions(*j, &gr, &err)) return Fail(err);
  if (j->contains("messages") && !(*j)["messages"].is_null()) {
    if (!(*j)["messages"].is_array()) return Fail(BadRequest("messages must be an array"));
    for (const auto& m : (*j)["messages"]) {
      if (!m.is_object()) return Fail(BadRequest("each message must be an object"));
      auto role = GetString(m, "role", &err);
      auto content = GetString(m, "content", &err);
      if (!err.message.empty()) return Fail(err);
      if (!role) return Fail(BadRequest("each message needs a role"));
      gr.messages.push_back({*role, content.value_or("")});
    }
  }
  if (gr.messages.empty()) return LoadOnly(svc, gr, true);
  return Run(svc, gr, true);
}

HttpResponse Embed(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  auto model = GetString(*j, "model", &err);
  auto input = GetStrings(*j, "input", &err);
  auto keep_alive = GetKeepAlive(*j, &err);
  if (!err.message.empty()) return Fail(err);
  if (!model) return Fail(BadRequest("model is required"));
  if (!input || input->empty()) return Fail(BadRequest("input is required"));
  auto t0 = Clock::now();
  auto lease = svc.pool().Acquire(*model, keep_alive);
  if (!lease) return Fail(FromError(lease.error()));
  double load = (*lease)->just_loaded ? (**lease)->load_seconds : 0;
  auto emb = (**lease)->Embed(*input, svc.threads());
  if (!emb) return Fail(FromError(emb.error()));
  HttpResponse r;
  r.log.model = (**lease)->name;
  r.log.prompt_tokens = emb->n_tokens;
  r.body = Dump({{"model", (**lease)->name},
                 {"embeddings", emb->vectors},
                 {"total_duration", Ns(std::chrono::duration<double>(Clock::now() - t0).count())},
                 {"load_duration", Ns(load)},
                 {"prompt_eval_count", emb->n_tokens}});
  return r;
}

HttpResponse LegacyEmbeddings(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  auto model = GetString(*j, "model", &err);
  auto prompt = GetString(*j, "prompt", &err);
  if (!err.message.empty()) return Fail(err);
  if (!model || !prompt) return Fail(BadRequest("model and prompt are required"));
  auto lease = svc.pool().Acquire(*model, GetKeepAlive(*j, &err));
  if (!lease) return Fail(FromError(lease.error()));
  auto emb = (**lease)->Embed({*prompt}, svc.threads());
  if (!emb) return Fail(FromError(emb.error()));
  HttpResponse r;
  r.log.model = (**lease)->name;
  r.body = Dump({{"embedding", emb->vectors[0]}});
  return r;
}

HttpResponse Tags(Service& svc) {
  json models = json::array();
  for (const auto& e : svc.pool().registry().entries()) {
    auto info = engine::InspectModel(e.path);
    json details = info ? Details(*info) : json::object();
    for (const std::string& name : [&] {
           std::vector<std::string> n{e.name};
           n.insert(n.end(), e.aliases.begin(), e.aliases.end());
           return n;
         }()) {
      models.push_back({{"name", name},
                        {"model", name},
                        {"modified_at", Rfc3339(0)},
                        {"size", e.file_bytes},
                        {"digest", ""},
                        {"details", details}});
    }
  }
  HttpResponse r;
  r.body = Dump({{"models", models}});
  return r;
}

HttpResponse Ps(Service& svc) {
  json models = json::array();
  for (const auto& m : svc.pool().Resident()) {
    std::time_t expires = m.expires_in_s ? std::time(nullptr) + static_cast<std::time_t>(*m.expires_in_s)
                                         : std::time(nullptr) + 10LL * 365 * 86400;
    auto info = engine::InspectModel(m.path);
    models.push_back({{"name", m.name},
                      {"model", m.name},
                      {"size", m.estimate_bytes},
                      {"digest", ""},
                      {"details", info ? Details(*info) : json::object()},
                      {"expires_at", Rfc3339(expires)},
                      {"size_vram", 0},
                      {"pinned", m.pinned},
                      {"context_length", m.ctx_per_slot}});
  }
  HttpResponse r;
  r.body = Dump({{"models", models}});
  return r;
}

HttpResponse Show(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return Fail(err);
  auto model = GetString(*j, "model", &err);
  if (!model) model = GetString(*j, "name", &err);
  if (!err.message.empty()) return Fail(err);
  if (!model) return Fail(BadRequest("model is required"));
  auto entry = svc.pool().registry().Resolve(*model);
  if (!entry) return Fail(FromError(entry.error()));
  auto info = engine::InspectModel((*entry)->path);
  if (!info) return Fail(FromError(info.error()));
  json model_info = {{"general.architecture", info->architecture},
                     {"general.parameter_count", info->n_params},
                     {info->architecture + ".context_length", info->n_ctx_train},
                     {info->architecture + ".embedding_length", info->n_embd},
                     {info->architecture + ".block_count", info->n_layer}};
  HttpResponse r;
  r.body = Dump({{"modelfile", ""},
                 {"parameters", ""},
                 {"template", info->chat_template},
                 {"details", Details(*info)},
                 {"model_info", model_info},
                 {"capabilities", {"completion", "embedding"}},
                 {"modified_at", Rfc3339(0)}});
  return r;
}

HttpResponse Version() {
  HttpResponse r;
  r.body = Dump({{"version", "0.6.4"}});  // the Ollama API level hone speaks (tested client)
  return r;
}

}  // namespace hone::serve::ollama
