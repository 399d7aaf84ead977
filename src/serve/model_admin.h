// backend::ModelAdmin over the local model pool: residency, file details,
// prompt rendering and the prompt cache, for the HTTP layer's admin and
// Ollama endpoints.
#pragma once

#include "backend/model_admin.h"
#include "serve/model_pool.h"

namespace hone::serve {

class LocalModelAdmin final : public backend::ModelAdmin {
 public:
  explicit LocalModelAdmin(ModelPool& pool) : pool_(pool) {}

  std::vector<backend::ResidentModel> Resident() override;
  Result<backend::ModelFileInfo> Describe(const std::string& name) override;
  Result<backend::RenderedPrompt> Render(const GenerationRequest& request) override;
  Status SetPinned(const std::string& name, bool pinned) override { return pool_.SetPinned(name, pinned); }
  Status Unload(const std::string& name) override { return pool_.Unload(name); }
  std::vector<backend::PromptCacheView> PromptCaches(const std::string& only) override;
  size_t ClearPromptCaches(const std::string& only, std::vector<std::string>* models) override;

 private:
  // Loaded models with a prompt cache, held so none unloads while it is read.
  std::vector<std::shared_ptr<LoadedModel>> CachedModels(const std::string& only);

  ModelPool& pool_;
};

}  // namespace hone::serve
