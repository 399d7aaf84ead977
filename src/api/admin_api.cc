#include "api/admin_api.h"

#include "api/errors.h"
#include "api/json_fields.h"

namespace hone::api {
namespace {
HttpResponse Fail(const Error& e) { return ErrorResponse(e, ApiFlavor::kOpenAI); }
}  // namespace

HttpResponse HoneLoad(backend::Backend& backend, backend::ModelAdmin& admin, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  auto pin = GetBool(*j, "pin", &err);
  auto keep_alive = GetKeepAlive(*j, &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("'model' is required"));
  auto loaded = backend.Load(*model, keep_alive);
  if (!loaded) return Fail(loaded.error());
  if (pin) (void)admin.SetPinned(loaded->model, *pin);
  HttpResponse r;
  r.log.model = loaded->model;
  r.body = Dump({{"model", loaded->model},
                 {"loaded", true},
                 {"load_seconds", loaded->load_seconds},
                 {"pinned", pin.value_or(false)}});
  return r;
}

HttpResponse HoneUnload(backend::ModelAdmin& admin, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("'model' is required"));
  if (Status s = admin.Unload(*model); !s) {
    HttpError e = ToHttpError(s.error(), ApiFlavor::kOpenAI);
    if (s.error().code == ErrorCode::kNotFound) e.code = "model_not_loaded";
    return ErrorResponse(e, ApiFlavor::kOpenAI);
  }
  HttpResponse r;
  r.log.model = *model;
  r.body = Dump({{"model", *model}, {"unloaded", true}});
  return r;
}

HttpResponse HoneRender(backend::ModelAdmin& admin, const api::GenerationCodec& chat, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  auto parsed = chat.Parse(*j);
  if (!parsed) return Fail(parsed.error());
  const backend::GenerationRequest& r = parsed->request;
  if (!r.chat || r.messages.empty()) return Fail(BadRequest("'messages' must not be empty"));
  auto p = admin.Render(r);
  if (!p) return Fail(p.error());
  HttpResponse res;
  res.log.model = p->model;
  res.body = Dump({{"model", p->model},
                   {"tokens", p->tokens.size()},
                   {"token_ids", p->tokens},
                   {"prompt", p->prompt},
                   {"format", p->format},
                   {"grammar", p->grammar},
                   {"grammar_lazy", p->grammar_lazy}});
  return res;
}

HttpResponse HoneRoutes(const std::function<std::string()>& routes_json) {
  HttpResponse r;
  r.body = routes_json ? routes_json() : R"({"routes":[],"overflow_rate":0})";
  return r;
}

HttpResponse HoneSpend(const std::function<std::string()>& spend_json) {
  if (!spend_json)
    return ErrorResponse(NotFound("this server keeps no spend ledger (it has no [[upstream]])"), ApiFlavor::kOpenAI);
  HttpResponse r;
  r.body = spend_json();
  return r;
}

HttpResponse HoneCanary(const CanaryControl& control, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(MakeError(ErrorCode::kInvalidArgument, "the body must be JSON"));
  Status err;
  auto route = GetString(*j, "route", &err);
  auto action = GetString(*j, "action", &err);
  if (!err.ok() || !route || !action || route->empty() || action->empty())
    return Fail(MakeError(ErrorCode::kInvalidArgument, "send {\"route\": NAME, \"action\": \"status|promote|rollback\"}"));
  if (!control) return Fail(MakeError(ErrorCode::kNotFound, "this server has no routes"));
  auto out = control(*route, *action);
  if (!out) return Fail(out.error());
  HttpResponse r;
  r.body = *out;
  return r;
}

HttpResponse HoneCacheList(backend::ModelAdmin& admin, const HttpRequest&) {
  json models = json::array();
  for (const backend::PromptCacheView& v : admin.PromptCaches("")) {
    json entries = json::array();
    for (const backend::PromptCacheEntry& e : v.entries) {
      entries.push_back({{"tenant", e.scope},
                         {"tokens", e.tokens},
                         {"bytes", e.bytes},
                         {"tier", e.tier},
                         {"on_disk", e.on_disk},
                         {"age_seconds", e.age_s},
                         {"idle_seconds", e.idle_s}});
    }
    models.push_back({{"model", v.model},
                      {"ram_bytes", v.ram_bytes},
                      {"ram_limit_bytes", v.ram_limit_bytes},
                      {"disk_bytes", v.disk_bytes},
                      {"disk_limit_bytes", v.disk_limit_bytes},
                      {"entries", std::move(entries)}});
  }
  HttpResponse r;
  r.body = json{{"object", "list"}, {"data", std::move(models)}}.dump();
  return r;
}

HttpResponse HoneCacheClear(backend::ModelAdmin& admin, const HttpRequest& req) {
  std::string only;
  if (!req.body.empty()) {
    auto j = ParseBody(req.body);
    if (!j) return Fail(j.error());
    Status err;
    if (auto model = GetString(*j, "model", &err)) only = *model;
    if (!err.ok()) return Fail(err.error());
  }
  std::vector<std::string> names;
  const size_t cleared = admin.ClearPromptCaches(only, &names);
  HttpResponse r;
  r.body = json{{"cleared_entries", cleared}, {"models", names}}.dump();
  return r;
}

}  // namespace hone::api
