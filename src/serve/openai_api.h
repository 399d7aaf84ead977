// OpenAI's REST API (models, chat completions, completions, embeddings),
// translated to and from GenRequest.
#pragma once

#include "serve/http_types.h"
#include "serve/service.h"

namespace hone::serve::openai {

HttpResponse Models(Service& svc);
HttpResponse ChatCompletions(Service& svc, const HttpRequest& req);
HttpResponse Completions(Service& svc, const HttpRequest& req);
HttpResponse Embeddings(Service& svc, const HttpRequest& req);

}  // namespace hone::serve::openai
