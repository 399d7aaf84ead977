#include "api/admin_api.h"

#include "api/errors.h"
#include "api/json_fields.h"
#include "serve/chat_prompt.h"

namespace hone::api {
namespace {
HttpResponse Fail(const Error& e) { return ErrorResponse(e, ApiFlavor::kOpenAI); }
}  // namespace

HttpResponse HoneLoad(serve::ModelPool& pool, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  auto pin = GetBool(*j, "pin", &err);
  auto keep_alive = GetKeepAlive(*j, &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("'model' is required"));
  auto lease = pool.Acquire(*model, keep_alive);
  if (!lease) return Fail(lease.error());
  std::string name = (**lease)->name;
  double load = (*lease)->just_loaded ? (**lease)->load_seconds : 0;
  lease->reset();
  if (pin) (void)pool.SetPinned(name, *pin);
  HttpResponse r;
  r.log.model = name;
  r.body = Dump({{"model", name}, {"loaded", true}, {"load_seconds", load}, {"pinned", pin.value_or(false)}});
  return r;
}

HttpResponse HoneUnload(serve::ModelPool& pool, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("'model' is required"));
  if (Status s = pool.Unload(*model); !s) {
    HttpError e = ToHttpError(s.error(), ApiFlavor::kOpenAI);
    if (s.error().code == ErrorCode::kNotFound) e.code = "model_not_loaded";
    return ErrorResponse(e, ApiFlavor::kOpenAI);
  }
  HttpResponse r;
  r.log.model = *model;
  r.body = Dump({{"model", *model}, {"unloaded", true}});
  return r;
}

HttpResponse HoneRender(serve::ModelPool& pool, const api::GenerationCodec& chat, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  auto parsed = chat.Parse(*j);
  if (!parsed) return Fail(parsed.error());
  const backend::GenerationRequest& r = parsed->request;
  if (!r.chat || r.messages.empty()) return Fail(BadRequest("'messages' must not be empty"));
  auto lease = pool.Acquire(r.model, std::nullopt);
  if (!lease) return Fail(lease.error());
  const serve::LoadedModel& m = ***lease;
  auto p = serve::RenderChat(*m.model, m.chat.get(), r);
  if (!p) return Fail(p.error());
  HttpResponse res;
  res.log.model = m.name;
  json out = {{"model", m.name}, {"tokens", p->tokens.size()}, {"token_ids", p->tokens}};
  if (p->plan) {
    out["prompt"] = p->plan->prompt;
    out["format"] = p->plan->format;
    out["grammar"] = !p->plan->grammar.empty();
    out["grammar_lazy"] = p->plan->grammar_lazy;
  } else {
    out["prompt"] = engine::Tokenizer(*m.model).Decode(p->tokens);  // the plain transcript
    out["format"] = "transcript";
    out["grammar"] = false;
    out["grammar_lazy"] = false;
  }
  res.body = Dump(out);
  return res;
}

namespace {

// Loaded models with a prompt cache, held so none unloads while it is read.
std::vector<std::shared_ptr<serve::LoadedModel>> CachedModels(serve::ModelPool& pool, const std::string& only) {
  std::vector<std::shared_ptr<serve::LoadedModel>> out;
  for (const auto& r : pool.Resident()) {
    if (!only.empty() && r.name != only) continue;
    auto m = pool.Peek(r.name);
    if (m && m->scheduler && m->scheduler->prompt_cache()) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

HttpResponse HoneCacheList(serve::ModelPool& pool, const HttpRequest&) {
  json models = json::array();
  for (const auto& m : CachedModels(pool, "")) {
    serve::PromptCache& cache = *m->scheduler->prompt_cache();
    json entries = json::array();
    for (const auto& e : cache.List()) {
      entries.push_back({{"tenant", e.scope},
                         {"tokens", e.tokens},
                         {"bytes", e.bytes},
                         {"tier", serve::CacheTierName(e.tier)},
                         {"on_disk", e.on_disk},
                         {"age_seconds", e.age_s},
                         {"idle_seconds", e.idle_s}});
    }
    models.push_back({{"model", m->name},
                      {"ram_bytes", cache.ram_bytes()},
                      {"ram_limit_bytes", cache.options().ram_bytes},
                      {"disk_bytes", cache.disk_bytes()},
                      {"disk_limit_bytes", cache.options().disk_bytes},
                      {"entries", std::move(entries)}});
  }
  HttpResponse r;
  r.body = json{{"object", "list"}, {"data", std::move(models)}}.dump();
  return r;
}

HttpResponse HoneCacheClear(serve::ModelPool& pool, const HttpRequest& req) {
  std::string only;
  if (!req.body.empty()) {
    auto j = ParseBody(req.body);
    if (!j) return Fail(j.error());
    Status err;
    if (auto model = GetString(*j, "model", &err)) only = *model;
    if (!err.ok()) return Fail(err.error());
  }
  size_t cleared = 0;
  json names = json::array();
  for (const auto& m : CachedModels(pool, only)) {
    serve::PromptCache& cache = *m->scheduler->prompt_cache();
    cleared += cache.List().size();
    cache.Clear();
    names.push_back(m->name);
  }
  HttpResponse r;
  r.body = json{{"cleared_entries", cleared}, {"models", std::move(names)}}.dump();
  return r;
}

}  // namespace hone::api
