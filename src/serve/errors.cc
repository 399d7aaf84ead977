#include "serve/errors.h"

#include <nlohmann/json.hpp>

namespace hone::serve {

ApiError FromError(const Error& e) {
  ApiError a;
  a.message = e.message;
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      a.status = 400, a.type = "invalid_request_error";
      break;
    case ErrorCode::kNotFound:
      a.status = 404, a.type = "invalid_request_error", a.code = "model_not_found";
      break;
    case ErrorCode::kOutOfMemory:
      // Admission refused: the server is fine but cannot host this model now.
      a.status = 507, a.type = "server_error", a.code = "insufficient_memory";
      break;
    case ErrorCode::kUnsupported:
      a.status = 409, a.type = "invalid_request_error", a.code = "conflict";
      break;
    case ErrorCode::kAborted:
      a.status = 504, a.type = "server_error", a.code = "timeout";
      break;
    case ErrorCode::kCorrupt:
    case ErrorCode::kIo:
    case ErrorCode::kInternal:
      a.status = 500, a.type = "server_error";
      break;
  }
  return a;
}

ApiError QueueFull(ApiFlavor flavor) {
  ApiError a;
  a.status = flavor == ApiFlavor::kOpenAI ? 429 : 503;
  a.message = "the server is busy: too many requests are waiting for this model; retry shortly";
  a.type = "rate_limit_error";
  a.code = "rate_limit_exceeded";
  a.retry_after_s = 1;
  return a;
}

ApiError BadRequest(const std::string& message) {
  return FromError(MakeError(ErrorCode::kInvalidArgument, message));
}

HttpResponse ErrorResponse(const ApiError& e, ApiFlavor flavor) {
  HttpResponse r;
  r.status = e.status;
  nlohmann::json j;
  if (flavor == ApiFlavor::kOpenAI) {
    j["error"] = {{"message", e.message},
                  {"type", e.type},
                  {"param", nullptr},
                  {"code", e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code)}};
  } else {
    j["error"] = e.message;
  }
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (e.retry_after_s > 0) r.headers["Retry-After"] = std::to_string(e.retry_after_s);
  r.log.error = e.message;
  return r;
}

}  // namespace hone::serve
