#include "engine/model.h"

#include <llama.h>

#include <chrono>
#include <filesystem>

#include "engine/amx.h"
#include "engine/backend.h"

namespace hone::engine {
namespace {

// Architectures llama.cpp can build a graph for: probe by name through its own
// list would need internals, so we ask it to load and read its log instead, and
// only pre-check the common failure (missing key) here.
ModelInfo InfoFromGguf(const GgufFile& g) {
  ModelInfo info;
  info.path = g.path;
  info.architecture = g.architecture;
  info.name = g.Get("general.name").value_or(std::filesystem::path(g.path).stem().string());
  info.n_params = g.n_params();
  info.file_bytes = g.file_bytes;
  info.tensor_bytes = g.tensor_bytes();
  info.bits_per_weight = g.bits_per_weight();
  info.n_ctx_train = static_cast<int32_t>(g.ArchInt("context_length").value_or(0));
  info.n_embd = static_cast<int32_t>(g.ArchInt("embedding_length").value_or(0));
  info.n_layer = static_cast<int32_t>(g.ArchInt("block_count").value_or(0));
  info.n_head = static_cast<int32_t>(g.ArchInt("attention.head_count").value_or(0));
  info.n_head_kv = static_cast<int32_t>(g.ArchInt("attention.head_count_kv").value_or(info.n_head));
  if (auto tokens = g.Get("tokenizer.ggml.tokens")) {
    // "[N items]"
    info.n_vocab = static_cast<int32_t>(std::strtol(tokens->c_str() + 1, nullptr, 10));
  }
  info.chat_template = g.Get("tokenizer.chat_template").value_or("");
  info.type_histogram = g.type_histogram;
  info.synthetic = g.Get("hone.synth.like").has_value();
  if (auto ft = g.Get("general.file_type")) {
    info.file_type = llama_ftype_name(static_cast<llama_ftype>(std::stoi(*ft)));
  }
  return info;
}

Error ClassifyLoadFailure(const std::string& path, const std::string& arch, const std::string& why) {
  auto has = [&](const char* s) { return why.find(s) != std::string::npos; };
  if (has("unknown model architecture")) {
    return MakeError(ErrorCode::kUnsupported, path + ": unknown model architecture '" + arch +
                                                  "' (not supported by this llama.cpp build)");
  }
  if (has("failed to allocate") || has("out of memory") || has("cannot allocate")) {
    return MakeError(ErrorCode::kOutOfMemory, path + ": not enough memory to load the model: " + why);
  }
  return MakeError(ErrorCode::kCorrupt,
                   path + ": llama.cpp could not load the model" + (why.empty() ? "" : ": " + why));
}

struct ProgressTrampoline {
  const std::function<bool(float)>* fn;
  bool cancelled = false;
};

bool OnLoadProgress(float progress, void* user) {
  auto* t = static_cast<ProgressTrampoline*>(user);
  if (!(*t->fn)(progress)) t->cancelled = true;
  return !t->cancelled;
}

}  // namespace

const char* LoadModeName(LoadMode mode) {
  switch (mode) {
    case LoadMode::kMmap:
      return "mmap";
    case LoadMode::kNoMmap:
      return "no-mmap";
    case LoadMode::kMlock:
      return "mlock";
    case LoadMode::kMmapMlock:
      return "mmap+mlock";
  }
  return "?";
}

Result<LoadMode> ParseLoadMode(const std::string& name) {
  if (name == "mmap") return LoadMode::kMmap;
  if (name == "no-mmap" || name == "none") return LoadMode::kNoMmap;
  if (name == "mlock") return LoadMode::kMlock;
  if (name == "mmap+mlock") return LoadMode::kMmapMlock;
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown load mode '" + name + "' (expected mmap, no-mmap, mlock or mmap+mlock)");
}

Result<ModelInfo> InspectModel(const std::string& path) {
  auto g = ReadGguf(path);
  if (!g) return g.error();
  return InfoFromGguf(*g);
}

Result<std::shared_ptr<Model>> Model::Load(const std::string& path, const LoadOptions& options) {
  EnsureBackend();
  auto g = ReadGguf(path);
  if (!g) return g.error();
  if (g->architecture.empty()) {
    return MakeError(ErrorCode::kCorrupt, path + ": GGUF has no general.architecture key");
  }

  llama_model_params mp = llama_model_default_params();
  switch (options.mode) {
    case LoadMode::kMmap:
      mp.load_mode = LLAMA_LOAD_MODE_MMAP;
      break;
    case LoadMode::kNoMmap:
      mp.load_mode = LLAMA_LOAD_MODE_NONE;
      break;
    case LoadMode::kMlock:
      mp.load_mode = LLAMA_LOAD_MODE_MLOCK;
      break;
    case LoadMode::kMmapMlock:
      mp.load_mode = LLAMA_LOAD_MODE_MMAP_MLOCK;
      break;
  }
  // Held until the load is done: ggml reads its AMX switch while placing weights.
  AmxLoadChoice amx(options.repack && options.amx);
  mp.use_extra_bufts = options.repack && amx.keep_repack();
  ProgressTrampoline trampoline{&options.on_progress};
  if (options.on_progress) {
    mp.progress_callback = &OnLoadProgress;
    mp.progress_callback_user_data = &trampoline;
  }

  auto start = std::chrono::steady_clock::now();
  TakeRecentLlamaErrors();
  llama_model* raw = llama_model_load_from_file(path.c_str(), mp);
  std::string why = TakeRecentLlamaErrors();
  if (!raw) {
    if (trampoline.cancelled) return MakeError(ErrorCode::kAborted, "loading " + path + " was cancelled");
    return ClassifyLoadFailure(path, g->architecture, why);
  }

  std::shared_ptr<Model> model(new Model());
  model->model_ = raw;
  model->options_ = options;
  model->amx_weights_ = amx.amx_on();
  model->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model->info_ = InfoFromGguf(*g);
  char desc[256];
  llama_model_desc(raw, desc, sizeof desc);
  model->info_.description = desc;
  model->info_.file_type = llama_ftype_name(llama_model_ftype(raw));
  model->info_.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(raw));
  model->info_.n_ctx_train = llama_model_n_ctx_train(raw);
  model->info_.n_embd = llama_model_n_embd(raw);
  model->info_.n_layer = llama_model_n_layer(raw);
  model->info_.n_head = llama_model_n_head(raw);
  model->info_.n_head_kv = llama_model_n_head_kv(raw);
  model->info_.has_encoder = llama_model_has_encoder(raw);
  model->info_.n_swa = llama_model_n_swa(raw);
  if (const char* tmpl = llama_model_chat_template(raw, nullptr)) model->info_.chat_template = tmpl;
  model->gguf_ = std::move(*g);
  return model;
}

Model::~Model() {
  if (model_) llama_model_free(model_);
}

const llama_vocab* Model::vocab() const { return llama_model_get_vocab(model_); }

}  // namespace hone::engine
