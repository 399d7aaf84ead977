// A loaded model: weights in memory plus the metadata hone reports about it.
// Thread-safe after Load(): many Sessions may share one Model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/gguf_file.h"
#include "util/result.h"

struct llama_model;
struct llama_vocab;

namespace hone::engine {

enum class LoadMode { kMmap, kNoMmap, kMlock, kMmapMlock };
const char* LoadModeName(LoadMode mode);
Result<LoadMode> ParseLoadMode(const std::string& name);  // "mmap", "no-mmap", "mlock", "mmap+mlock"

struct LoadOptions {
  // Affects speed and memory: mmap shares the page cache and starts fast;
  // no-mmap copies into private memory; mlock pins pages so they are never swapped.
  LoadMode mode = LoadMode::kMmap;
  // Repack weights into the CPU's preferred layout at load (llama.cpp's "extra
  // buffer types"): faster matmuls, slower load, no page-cache sharing.
  bool repack = true;
  // With repacking, let Intel AMX kernels take the weights where the CPU has
  // AMX and hone's self-test passed (engine/amx.h); false keeps the AVX-512 or
  // AVX2 repacked layouts. No effect on CPUs without AMX.
  bool amx = true;
  // Called with 0..1 while loading; return false to cancel (Load then fails with kAborted).
  std::function<bool(float)> on_progress;
};

struct ModelInfo {
  std::string path;
  std::string name;  // general.name, else the file stem
  std::string architecture;
  std::string description;  // llama.cpp's, e.g. "qwen2 1B F16"
  std::string file_type;    // e.g. "Q4_K - Medium"
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  uint64_t tensor_bytes = 0;
  double bits_per_weight = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_vocab = 0;
  std::string chat_template;  // empty when the GGUF has none
  std::map<std::string, TypeShare> type_histogram;
  bool has_encoder = false;
  int32_t n_swa = 0;  // sliding-window attention span; 0 = none (a sequence's saved state then lacks old cells)
  bool synthetic = false;  // made by `hone synth`
};

class Model {
 public:
  // Errors: kNotFound, kCorrupt (not a GGUF / truncated / damaged tensors),
  // kUnsupported (unknown architecture), kOutOfMemory, kAborted (progress said stop).
  static Result<std::shared_ptr<Model>> Load(const std::string& path, const LoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const { return info_; }
  const GgufFile& gguf() const { return gguf_; }
  double load_seconds() const { return load_seconds_; }
  const LoadOptions& load_options() const { return options_; }
  bool amx_weights() const { return amx_weights_; }  // weights sit in AMX buffers

  // For the engine's own use (sessions, tokenizer); not part of hone's API.
  llama_model* raw() const { return model_; }
  const llama_vocab* vocab() const;

 private:
  Model() = default;
  llama_model* model_ = nullptr;
  ModelInfo info_;
  GgufFile gguf_;
  LoadOptions options_;
  bool amx_weights_ = false;
  double load_seconds_ = 0;
};

// Metadata only, from the file header: no weights are read.
Result<ModelInfo> InspectModel(const std::string& path);

}  // namespace hone::engine
