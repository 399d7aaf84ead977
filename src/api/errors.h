// Every error the server answers with goes through here: one function decides
// the HTTP status for a core error code, per API flavour, and one builds the
// flavour's envelope (OpenAI's {"error": {...}}, Ollama's {"error": "..."},
// Anthropic's {"type": "error", "error": {"type", "message"}}).
#pragma once

#include <string>

#include "api/http_types.h"
#include "util/result.h"

namespace hone::api {

enum class ApiFlavor { kOpenAI, kOllama, kAnthropic };

// An error as HTTP sees it.
struct HttpError {
  int status = 500;
  std::string message;
  std::string type;  // OpenAI "type": invalid_request_error, not_found_error, ...
  std::string code;  // OpenAI "code": model_not_found, rate_limit_exceeded, ...
  int retry_after_s = 0;
};

// The one mapping from hone's error codes to HTTP. The flavours differ only
// where their clients expect it: a full queue (kBusy) is 429 to OpenAI's and
// Anthropic's clients, which retry on it, and 503 to Ollama's.
HttpError ToHttpError(const Error& e, ApiFlavor flavor);
// The response, with Retry-After when the error advises one.
HttpResponse ErrorResponse(const HttpError& e, ApiFlavor flavor);
HttpResponse ErrorResponse(const Error& e, ApiFlavor flavor);
// Anthropic's error type for a status: invalid_request_error, authentication_error,
// not_found_error, request_too_large, rate_limit_error, overloaded_error, api_error.
const char* AnthropicErrorType(int status);

// Errors of the HTTP layer itself, before a handler (400 unreadable headers,
// 413 a body over --max-body, 414, 415 a compressed body, 404 no route):
// `max_body` is the flag's text, named in the 413.
HttpError ProtocolError(int status, const std::string& method, const std::string& path,
                        const std::string& max_body);

// The HTTP layer's own refusals, before a request reaches its route.
HttpError Overloaded(int max_connections);  // 503: past --max-connections
HttpError Draining();                        // 503: a SIGTERM's drain has begun
HttpError Forbidden(const std::string& why);  // 403: Host, Origin or admin scope
HttpError NotJson(const std::string& content_type);  // 415: a browser's non-JSON POST
HttpError Unauthenticated();                 // 401: no key, or not one of ours
HttpError NotFound(const std::string& why);  // 404: nothing of that kind here

// The answer to a client that disconnected before it: nobody reads it, but the
// log line records status 499 (nginx's "client closed request").
HttpResponse ClientClosed(RequestLog log);

}  // namespace hone::api
