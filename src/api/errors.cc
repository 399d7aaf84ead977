#include "api/errors.h"

#include <nlohmann/json.hpp>

namespace hone::api {

HttpError ToHttpError(const Error& e, ApiFlavor flavor) {
  HttpError h;
  h.message = e.message;
  h.retry_after_s = e.retry_after_s;
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      h.status = 400, h.type = "invalid_request_error";
      break;
    case ErrorCode::kNotFound:
      h.status = 404, h.type = "invalid_request_error", h.code = "model_not_found";
      break;
    case ErrorCode::kOutOfMemory:
      // Admission refused: the server is fine but cannot host this model now.
      h.status = 507, h.type = "server_error", h.code = "insufficient_memory";
      break;
    case ErrorCode::kUnsupported:
      h.status = 409, h.type = "invalid_request_error", h.code = "conflict";
      break;
    case ErrorCode::kBusy:
      h.status = flavor == ApiFlavor::kOllama ? 503 : 429;
      h.type = "rate_limit_error", h.code = "rate_limit_exceeded";
      break;
    case ErrorCode::kRateLimited:
      h.status = 429, h.type = "rate_limit_error", h.code = "rate_limit_exceeded";
      break;
    case ErrorCode::kUnavailable:
      h.status = 503, h.type = "server_error", h.code = "unavailable";
      break;
    case ErrorCode::kUpstream:
      h.status = 502, h.type = "server_error", h.code = "upstream_error";
      break;
    case ErrorCode::kTimeout:
    case ErrorCode::kAborted:
      h.status = 504, h.type = "server_error", h.code = "timeout";
      break;
    case ErrorCode::kCorrupt:
    case ErrorCode::kIo:
    case ErrorCode::kInternal:
      h.status = 500, h.type = "server_error";
      break;
    case ErrorCode::kPermissionDenied:
      h.status = 403, h.type = "invalid_request_error", h.code = "forbidden";
      break;
  }
  // An upstream refused the request itself: its client sees the same status
  // (a too-large body stays 413, a schema error 422), as from the upstream.
  if ((e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kNotFound) && e.upstream_status >= 400 &&
      e.upstream_status < 500) {
    h.status = e.upstream_status;
    if (h.status == 413) h.code = "request_too_large";
    if (h.status != 404 && h.code == "model_not_found") h.code.clear();
  }
  return h;
}

HttpResponse ErrorResponse(const HttpError& e, ApiFlavor flavor) {
  HttpResponse r;
  r.status = e.status;
  nlohmann::json j;
  if (flavor == ApiFlavor::kOpenAI) {
    j["error"] = {{"message", e.message},
                  {"type", e.type},
                  {"param", nullptr},
                  {"code", e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code)}};
  } else if (flavor == ApiFlavor::kAnthropic) {
    j = {{"type", "error"}, {"error", {{"type", AnthropicErrorType(e.status)}, {"message", e.message}}}};
  } else {
    j["error"] = e.message;
  }
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (e.retry_after_s > 0) r.headers["Retry-After"] = std::to_string(e.retry_after_s);
  r.log.error = e.message;
  return r;
}

const char* AnthropicErrorType(int status) {
  switch (status) {
    case 400:
    case 409:
    case 415:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

HttpResponse ErrorResponse(const Error& e, ApiFlavor flavor) {
  return ErrorResponse(ToHttpError(e, flavor), flavor);
}

HttpError ProtocolError(int status, const std::string& method, const std::string& path,
                        const std::string& max_body) {
  std::string message, code;
  switch (status) {
    case 400:
      message =
          "the request could not be read: a malformed request line or header, a header line over 8 KiB, "
          "or more than 100 headers";
      code = "bad_request";
      break;
    case 413:
      message = "the request body is larger than --max-body (" + max_body +
                "), counted after any chunked or compressed encoding";
      code = "payload_too_large";
      break;
    case 414:
      message = "the request URI is longer than 32 KiB", code = "uri_too_long";
      break;
    case 415:
      message = "the request body's Content-Encoding is not supported: send it uncompressed";
      code = "unsupported_media_type";
      break;
    case 404:
      message = "no such endpoint: " + method + " " + path;
      break;
    default:
      message = "HTTP " + std::to_string(status);
  }
  return HttpError{status, message, "invalid_request_error", code};
}

HttpError Overloaded(int max_connections) {
  return {503,
          "the server holds " + std::to_string(max_connections) +
              " connections (--max-connections); retry shortly",
          "server_error", "overloaded", 1};
}

HttpError Draining() {
  return {503, "the server is shutting down; retry on another replica", "server_error", "unavailable", 1};
}

HttpError Forbidden(const std::string& why) { return {403, why, "invalid_request_error", "forbidden"}; }

HttpError NotJson(const std::string& content_type) {
  return {415, "the request body must be JSON (Content-Type: application/json), not " + content_type,
          "invalid_request_error", "unsupported_media_type"};
}

HttpError NotFound(const std::string& why) { return {404, why, "invalid_request_error", "not_found"}; }

HttpError Unauthenticated() {
  return {401, "invalid or missing API key (send Authorization: Bearer <key>, or x-api-key: <key>)",
          "invalid_request_error", "invalid_api_key"};
}

HttpResponse ClientClosed(RequestLog log) {
  HttpResponse res;
  res.status = 499;
  res.body = R"({"error":"client closed the request"})";
  res.log = std::move(log);
  return res;
}

}  // namespace hone::api
