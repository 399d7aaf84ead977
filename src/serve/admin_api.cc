#include "serve/admin_api.h"

#include "serve/api_common.h"

namespace hone::serve {

HttpResponse HoneLoad(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return ErrorResponse(err, ApiFlavor::kOpenAI);
  auto model = GetString(*j, "model", &err);
  auto pin = GetBool(*j, "pin", &err);
  auto keep_alive = GetKeepAlive(*j, &err);
  if (!err.message.empty()) return ErrorResponse(err, ApiFlavor::kOpenAI);
  if (!model) return ErrorResponse(BadRequest("'model' is required"), ApiFlavor::kOpenAI);
  auto lease = svc.pool().Acquire(*model, keep_alive);
  if (!lease) return ErrorResponse(FromError(lease.error()), ApiFlavor::kOpenAI);
  std::string name = (**lease)->name;
  double load = (*lease)->just_loaded ? (**lease)->load_seconds : 0;
  lease->reset();
  if (pin) (void)svc.pool().SetPinned(name, *pin);
  HttpResponse r;
  r.log.model = name;
  r.body = Dump({{"model", name}, {"loaded", true}, {"load_seconds", load}, {"pinned", pin.value_or(false)}});
  return r;
}

HttpResponse HoneUnload(Service& svc, const HttpRequest& req) {
  ApiError err;
  auto j = ParseBody(req.body, &err);
  if (!j) return ErrorResponse(err, ApiFlavor::kOpenAI);
  auto model = GetString(*j, "model", &err);
  if (!err.message.empty()) return ErrorResponse(err, ApiFlavor::kOpenAI);
  if (!model) return ErrorResponse(BadRequest("'model' is required"), ApiFlavor::kOpenAI);
  if (Status s = svc.pool().Unload(*model); !s) {
    ApiError e = FromError(s.error());
    if (s.error().code == ErrorCode::kNotFound) e.code = "model_not_loaded";
    return ErrorResponse(e, ApiFlavor::kOpenAI);
  }
  HttpResponse r;
  r.log.model = *model;
  r.body = Dump({{"model", *model}, {"unloaded", true}});
  return r;
}

}  // namespace hone::serve
