// hone's own residency endpoints for the local models (the OpenAI API has
// none, and Ollama's are implicit in keep_alive): POST /hone/load and
// /hone/unload, and POST /hone/render, which shows the prompt a chat request
// becomes. Errors use OpenAI's envelope.
#pragma once

#include <functional>
#include <string>

#include "api/codec.h"
#include "api/http_types.h"
#include "backend/backend.h"
#include "backend/model_admin.h"

namespace hone::api {

// {"model": NAME, "pin": true|false (optional), "keep_alive": "5m"|seconds (optional)}
// The load goes through the backend (a route name loads its local target).
HttpResponse HoneLoad(backend::Backend& backend, backend::ModelAdmin& admin, const HttpRequest& req);
// {"model": NAME}: 200 unloaded, 404 not loaded, 409 busy (it unloads when idle).
HttpResponse HoneUnload(backend::ModelAdmin& admin, const HttpRequest& req);
// An OpenAI chat body (messages, tools, tool_choice): {"model", "prompt" (the
// template's text), "tokens", "format" (the tool-call format), "grammar"
// (whether one constrains the answer), "grammar_lazy"}. Loads the model.
HttpResponse HoneRender(backend::ModelAdmin& admin, const api::GenerationCodec& chat, const HttpRequest& req);

// GET /hone/routes: the router's view (routes, targets, breakers, keys by
// fingerprint); a server without routes answers an empty list.
HttpResponse HoneRoutes(const std::function<std::string()>& routes_json);
// GET /hone/spend: the ledger's month; 404 on a server that keeps none.
HttpResponse HoneSpend(const std::function<std::string()>& spend_json);
// POST /hone/routes/canary {"route": NAME, "action": "status|promote|rollback"}.
using CanaryControl = std::function<Result<std::string>(const std::string& route, const std::string& action)>;
HttpResponse HoneCanary(const CanaryControl& control, const HttpRequest& req);

// GET /hone/cache: the prompt cache of every loaded model, its entries by
// tenant (scope) with tokens, bytes, tier and ages; no tokens or text.
HttpResponse HoneCacheList(backend::ModelAdmin& admin, const HttpRequest& req);
// DELETE /hone/cache, optionally {"model": NAME}: drops the entries of every
// loaded model (or that one) from RAM and disk. Answers how many went.
HttpResponse HoneCacheClear(backend::ModelAdmin& admin, const HttpRequest& req);

}  // namespace hone::api
