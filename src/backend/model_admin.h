// The local models' administration, as the HTTP layer sees it: which models
// are resident, what a model file says about itself, the prompt a chat
// renders to, residency controls, and the prompt cache. Loading is not here:
// every load goes through Backend::Load, so a route name loads its local
// target whoever asks (/hone/load, Ollama's empty prompt).
//
// serve::LocalModelAdmin implements it over the model pool; src/api reaches
// models and tokens only through this and Backend, never the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "util/result.h"

namespace hone::backend {

// What a model file says about itself (Ollama's show and ps details).
struct ModelFileInfo {
  ModelCard::Details details;  // architecture, parameters, quantization
  int32_t n_ctx_train = 0, n_embd = 0, n_layer = 0;
  std::string chat_template;  // empty when the file has none
};

struct ResidentModel {
  std::string name;
  uint64_t estimate_bytes = 0;
  bool pinned = false;
  std::optional<double> expires_in_s;  // nullopt: never
  int ctx_per_slot = 0;
  int slots = 0;
  std::string profile;                // the `hone tune` profile applied at load, empty when none
  std::optional<ModelFileInfo> file;  // nullopt when the file could not be read
};

// A chat request as the model would see it (POST /hone/render).
struct RenderedPrompt {
  std::string model;  // canonical name
  std::vector<int32_t> tokens;
  std::string prompt;         // the template's text, or the plain transcript without a template
  std::string format;         // the tool-call format's name, or "transcript"
  bool grammar = false;       // a grammar constrains the answer
  bool grammar_lazy = false;  // ...only from its trigger on
};

struct PromptCacheEntry {
  std::string scope;  // the tenant (or salt) it belongs to
  int tokens = 0;
  uint64_t bytes = 0;
  std::string tier;  // "ram", "disk"
  bool on_disk = false;
  double age_s = 0, idle_s = 0;
};

struct PromptCacheView {
  std::string model;
  uint64_t ram_bytes = 0, ram_limit_bytes = 0, disk_bytes = 0, disk_limit_bytes = 0;
  std::vector<PromptCacheEntry> entries;
};

class ModelAdmin {
 public:
  virtual ~ModelAdmin() = default;
  // Resident models, their files' details included. Thread-safe.
  virtual std::vector<ResidentModel> Resident() = 0;
  // The registry model `name` (or alias) describes. Errors: kNotFound, kCorrupt.
  virtual Result<ModelFileInfo> Describe(const std::string& name) = 0;
  // Renders and tokenizes a chat exactly as a generation would (loads the model).
  virtual Result<RenderedPrompt> Render(const GenerationRequest& request) = 0;
  // Keeps a resident model from being evicted (or lets it be again).
  virtual Status SetPinned(const std::string& name, bool pinned) = 0;
  // Unloads a resident model once idle. Errors: kNotFound (not resident).
  virtual Status Unload(const std::string& name) = 0;
  // Resident models' prompt caches; `only` names one model (empty: all).
  virtual std::vector<PromptCacheView> PromptCaches(const std::string& only) = 0;
  // Empties them; returns the entries dropped and the models they were in.
  virtual size_t ClearPromptCaches(const std::string& only, std::vector<std::string>* models) = 0;
};

}  // namespace hone::backend
