// Ollama endpoints that look at the local models (backend::ModelAdmin)
// rather than at a Backend: /api/ps (what is resident), /api/show (a model file's metadata)
// and /api/version. They describe this machine's models, so a router in front
// of the backends does not change what they answer.
#pragma once

#include "api/http_types.h"
#include "backend/model_admin.h"

namespace hone::api::ollama {

HttpResponse Ps(backend::ModelAdmin& admin);
HttpResponse Show(backend::ModelAdmin& admin, const HttpRequest& req);
HttpResponse Version();

}  // namespace hone::api::ollama
