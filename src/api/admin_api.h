// hone's own residency endpoints for the local model pool (the OpenAI API has
// none, and Ollama's are implicit in keep_alive): POST /hone/load and
// /hone/unload. Errors use OpenAI's envelope.
#pragma once

#include "api/http_types.h"
#include "serve/model_pool.h"

namespace hone::api {

// {"model": NAME, "pin": true|false (optional), "keep_alive": "5m"|seconds (optional)}
HttpResponse HoneLoad(serve::ModelPool& pool, const HttpRequest& req);
// {"model": NAME}: 200 unloaded, 404 not loaded, 409 busy (it unloads when idle).
HttpResponse HoneUnload(serve::ModelPool& pool, const HttpRequest& req);

}  // namespace hone::api
