#include "api/ollama_local.h"

#include "api/errors.h"
#include "api/json_fields.h"
#include "api/ollama_codec.h"

namespace hone::api::ollama {
namespace {

HttpResponse Fail(const Error& e) { return ErrorResponse(e, ApiFlavor::kOllama); }

json DetailsOf(const std::string& path) {
  auto info = engine::InspectModel(path);
  if (!info) return json::object();
  return DetailsJson({info->architecture, info->n_params, info->file_type});
}

}  // namespace

HttpResponse Ps(const serve::ModelPool& pool) {
  json models = json::array();
  for (const auto& m : pool.Resident()) {
    std::time_t expires = m.expires_in_s ? std::time(nullptr) + static_cast<std::time_t>(*m.expires_in_s)
                                         : std::time(nullptr) + 10LL * 365 * 86400;
    models.push_back({{"name", m.name},
                      {"model", m.name},
                      {"size", m.estimate_bytes},
                      {"digest", ""},
                      {"details", DetailsOf(m.path)},
                      {"expires_at", Rfc3339(expires)},
                      {"size_vram", 0},
                      {"pinned", m.pinned},
                      {"context_length", m.ctx_per_slot}});
  }
  HttpResponse r;
  r.body = Dump({{"models", models}});
  return r;
}

HttpResponse Show(const serve::ModelPool& pool, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  if (!model) model = GetString(*j, "name", &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("model is required"));
  auto entry = pool.registry().Resolve(*model);
  if (!entry) return Fail(entry.error());
  auto info = engine::InspectModel((*entry)->path);
  if (!info) return Fail(info.error());
  json model_info = {{"general.architecture", info->architecture},
                     {"general.parameter_count", info->n_params},
                     {info->architecture + ".context_length", info->n_ctx_train},
                     {info->architecture + ".embedding_length", info->n_embd},
                     {info->architecture + ".block_count", info->n_layer}};
  HttpResponse r;
  r.body = Dump({{"modelfile", ""},
                 {"parameters", ""},
                 {"template", info->chat_template},
                 {"details", DetailsJson({info->architecture, info->n_params, info->file_type})},
                 {"model_info", model_info},
                 {"capabilities", {"completion", "embedding"}},
                 {"modified_at", Rfc3339(0)}});
  return r;
}

HttpResponse Version() {
  HttpResponse r;
  r.body = Dump({{"version", "0.6.4"}});  // the Ollama API level hone speaks (tested client)
  return r;
}

}  // namespace hone::api::ollama
