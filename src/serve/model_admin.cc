#include "serve/model_admin.h"

#include "engine/tokenizer.h"
#include "serve/chat_prompt.h"
#include "serve/prompt_cache.h"
#include "serve/scheduler.h"

namespace hone::serve {
namespace {

backend::ModelFileInfo ToFileInfo(const engine::ModelInfo& info) {
  backend::ModelFileInfo out;
  out.details = {info.architecture, info.n_params, info.file_type};
  out.n_ctx_train = info.n_ctx_train;
  out.n_embd = info.n_embd;
  out.n_layer = info.n_layer;
  out.chat_template = info.chat_template;
  return out;
}

std::optional<backend::ModelFileInfo> FileInfo(const std::string& path) {
  auto info = engine::InspectModel(path);
  if (!info) return std::nullopt;
  return ToFileInfo(*info);
}

}  // namespace

std::vector<backend::ResidentModel> LocalModelAdmin::Resident() {
  std::vector<backend::ResidentModel> out;
  for (const ResidentInfo& m : pool_.Resident()) {
    out.push_back({.name = m.name,
                   .estimate_bytes = m.estimate_bytes,
                   .pinned = m.pinned,
                   .expires_in_s = m.expires_in_s,
                   .ctx_per_slot = m.ctx_per_slot,
                   .slots = m.slots,
                   .profile = m.profile,
                   .file = FileInfo(m.path)});
  }
  return out;
}

Result<backend::ModelFileInfo> LocalModelAdmin::Describe(const std::string& name) {
  auto entry = pool_.registry().Resolve(name);
  if (!entry) return entry.error();
  auto info = engine::InspectModel((*entry)->path);
  if (!info) return info.error();
  return ToFileInfo(*info);
}

Result<backend::RenderedPrompt> LocalModelAdmin::Render(const GenerationRequest& r) {
  auto lease = pool_.Acquire(r.model, std::nullopt);
  if (!lease) return lease.error();
  const LoadedModel& m = ***lease;
  auto p = RenderChat(*m.model, m.chat.get(), r);
  if (!p) return p.error();
  backend::RenderedPrompt out;
  out.model = m.name;
  out.tokens.assign(p->tokens.begin(), p->tokens.end());
  if (p->plan) {
    out.prompt = p->plan->prompt;
    out.format = p->plan->format;
    out.grammar = !p->plan->grammar.empty();
    out.grammar_lazy = p->plan->grammar_lazy;
  } else {
    out.prompt = engine::Tokenizer(*m.model).Decode(p->tokens);  // the plain transcript
    out.format = "transcript";
  }
  return out;
}

std::vector<std::shared_ptr<LoadedModel>> LocalModelAdmin::CachedModels(const std::string& only) {
  std::vector<std::shared_ptr<LoadedModel>> out;
  for (const auto& r : pool_.Resident()) {
    if (!only.empty() && r.name != only) continue;
    auto m = pool_.Peek(r.name);
    if (m && m->scheduler && m->scheduler->prompt_cache()) out.push_back(std::move(m));
  }
  return out;
}

std::vector<backend::PromptCacheView> LocalModelAdmin::PromptCaches(const std::string& only) {
  std::vector<backend::PromptCacheView> out;
  for (const auto& m : CachedModels(only)) {
    PromptCache& cache = *m->scheduler->prompt_cache();
    backend::PromptCacheView v{.model = m->name,
                               .ram_bytes = cache.ram_bytes(),
                               .ram_limit_bytes = cache.ram_limit_bytes(),
                               .disk_bytes = cache.disk_bytes(),
                               .disk_limit_bytes = cache.options().disk_bytes,
                               .entries = {}};
    for (const auto& e : cache.List())
      v.entries.push_back({e.scope, static_cast<int>(e.tokens), e.bytes, CacheTierName(e.tier), e.on_disk,
                           e.age_s, e.idle_s});
    out.push_back(std::move(v));
  }
  return out;
}

size_t LocalModelAdmin::ClearPromptCaches(const std::string& only, std::vector<std::string>* models) {
  size_t cleared = 0;
  for (const auto& m : CachedModels(only)) {
    PromptCache& cache = *m->scheduler->prompt_cache();
    cleared += cache.List().size();
    cache.Clear();
    if (models) models->push_back(m->name);
  }
  return cleared;
}

}  // namespace hone::serve
