// Ollama endpoints that look at the local model pool itself rather than at a
// Backend: /api/ps (what is resident), /api/show (a model file's metadata)
// and /api/version. They describe this machine's models, so a router in front
// of the backends does not change what they answer.
#pragma once

#include "api/http_types.h"
#include "serve/model_pool.h"

namespace hone::api::ollama {

HttpResponse Ps(const serve::ModelPool& pool);
HttpResponse Show(const serve::ModelPool& pool, const HttpRequest& req);
HttpResponse Version();

}  // namespace hone::api::ollama
