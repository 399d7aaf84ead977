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
  const serve::GenerationRequest& r = parsed->request;
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

}  // namespace hone::api
