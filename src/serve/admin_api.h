// hone's own residency endpoints (the OpenAI API has none, and Ollama's are
// implicit in keep_alive): POST /hone/load and /hone/unload.
#pragma once

#include "serve/http_types.h"
#include "serve/service.h"

namespace hone::serve {

// {"model": NAME, "pin": true|false (optional), "keep_alive": "5m"|seconds (optional)}
HttpResponse HoneLoad(Service& svc, const HttpRequest& req);
// {"model": NAME}: 200 unloaded, 404 not loaded, 409 busy (it unloads when idle).
HttpResponse HoneUnload(Service& svc, const HttpRequest& req);

}  // namespace hone::serve
