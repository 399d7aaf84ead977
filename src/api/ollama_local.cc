#include "api/ollama_local.h"

#include <filesystem>

#include "api/errors.h"
#include "api/json_fields.h"
#include "api/ollama_codec.h"

namespace hone::api::ollama {
namespace {

HttpResponse Fail(const Error& e) { return ErrorResponse(e, ApiFlavor::kOllama); }

}  // namespace

HttpResponse Ps(backend::ModelAdmin& admin) {
  json models = json::array();
  for (const backend::ResidentModel& m : admin.Resident()) {
    std::time_t expires = m.expires_in_s ? std::time(nullptr) + static_cast<std::time_t>(*m.expires_in_s)
                                         : std::time(nullptr) + 10LL * 365 * 86400;
    models.push_back({{"name", m.name},
                      {"model", m.name},
                      {"size", m.estimate_bytes},
                      {"digest", ""},
                      {"details", m.file ? DetailsJson(m.file->details) : json::object()},
                      {"expires_at", Rfc3339(expires)},
                      {"size_vram", 0},
                      {"pinned", m.pinned},
                      {"context_length", m.ctx_per_slot},
                      // hone's own: the slots, and the tuned profile by file name
                      // only (its folder would tell clients the server's home).
                      {"slots", m.slots},
                      {"profile", std::filesystem::path(m.profile).filename().string()}});
  }
  HttpResponse r;
  r.body = Dump({{"models", models}});
  return r;
}

HttpResponse Show(backend::ModelAdmin& admin, const HttpRequest& req) {
  auto j = ParseBody(req.body);
  if (!j) return Fail(j.error());
  Status err;
  auto model = GetString(*j, "model", &err);
  if (!model) model = GetString(*j, "name", &err);
  if (!err.ok()) return Fail(err.error());
  if (!model) return Fail(BadRequest("model is required"));
  auto info = admin.Describe(*model);
  if (!info) return Fail(info.error());
  const std::string& arch = info->details.family;
  json model_info = {{"general.architecture", arch},
                     {"general.parameter_count", info->details.parameters},
                     {arch + ".context_length", info->n_ctx_train},
                     {arch + ".embedding_length", info->n_embd},
                     {arch + ".block_count", info->n_layer}};
  HttpResponse r;
  r.body = Dump({{"modelfile", ""},
                 {"parameters", ""},
                 {"template", info->chat_template},
                 {"details", DetailsJson(info->details)},
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
