// Ollama's REST API (/api/...), translated to and from GenRequest. Streams
// NDJSON by default, reports Ollama's final statistics in nanoseconds, and
// honours keep_alive (a duration; 0 unloads; negative keeps forever).
#pragma once

#include "serve/http_types.h"
#include "serve/service.h"

namespace hone::serve::ollama {

HttpResponse Tags(Service& svc);
HttpResponse Ps(Service& svc);
HttpResponse Show(Service& svc, const HttpRequest& req);
HttpResponse Generate(Service& svc, const HttpRequest& req);
HttpResponse Chat(Service& svc, const HttpRequest& req);
HttpResponse Embed(Service& svc, const HttpRequest& req);
HttpResponse LegacyEmbeddings(Service& svc, const HttpRequest& req);
HttpResponse Version();

}  // namespace hone::serve::ollama
