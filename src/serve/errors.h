// Every error the server answers with goes through here: one place decides
// the HTTP status for an error code, and the two envelopes (OpenAI's and
// Ollama's) are built from it.
#pragma once

#include <string>

#include "serve/http_types.h"
#include "util/result.h"

namespace hone::serve {

enum class ApiFlavor { kOpenAI, kOllama };

struct ApiError {
  int status = 500;
  std::string message;
  std::string type;  // OpenAI "type": invalid_request_error, not_found_error, ...
  std::string code;  // OpenAI "code": model_not_found, rate_limit_exceeded, ...
  int retry_after_s = 0;
};

// The one mapping from hone's error codes to HTTP.
ApiError FromError(const Error& e);
ApiError QueueFull(ApiFlavor flavor);  // 429 + Retry-After on OpenAI, 503 on Ollama
ApiError BadRequest(const std::string& message);
HttpResponse ErrorResponse(const ApiError& e, ApiFlavor flavor);

}  // namespace hone::serve
