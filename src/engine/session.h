// A Session is one llama.cpp context over a shared Model: the KV cache, the
// thread pools and the run parameters that `hone tune` searches over.
// Not thread-safe: one thread drives a Session at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "util/result.h"

struct llama_batch;
struct llama_context;
struct ggml_threadpool;
struct ggml_tensor;

namespace hone::engine {

enum class FlashAttn { kAuto, kOn, kOff };
const char* FlashAttnName(FlashAttn f);
Result<FlashAttn> ParseFlashAttn(const std::string& s);  // "auto", "on", "off"

enum class Pooling { kModelDefault, kNone, kMean, kCls, kLast };

struct SessionOptions {
  // --- affects capacity and memory ---
  uint32_t n_ctx = 4096;   // KV cells for all sequences together; 0 = training context
  uint32_t n_seq_max = 1;  // parallel sequences (server slots)
  std::string kv_type_k = "f16";
  std::string kv_type_v = "f16";  // quantized V needs flash attention
  bool embeddings = false;        // embedding model use: outputs pooled vectors
  Pooling pooling = Pooling::kModelDefault;
  // One KV stream shared by every sequence instead of one stream each.
  // llama.cpp splits a batch over separate streams into ubatches holding the
  // same number of tokens for consecutive sequence ids, so a step where one
  // sequence drafts k tokens (or the running slots' ids have gaps) runs as
  // several forward passes; a shared stream takes any mix in one pass.
  bool kv_unified = false;

  // --- affects speed only ---
  uint32_t n_batch = 2048;  // logical batch: most tokens per Decode call
  uint32_t n_ubatch = 512;  // physical batch: tokens per graph evaluation
  int threads = 0;          // decode (1 token per sequence); 0 = physical cores
  int threads_batch = 0;    // prefill; 0 = same as threads
  FlashAttn flash_attn = FlashAttn::kAuto;
  // CPU placement. Empty = let the OS schedule. Otherwise threads are pinned
  // to these logical CPUs (decode uses the first `threads` of them).
  std::vector<int> cpus;
  // Prefill's own CPUs where they differ from decode's: on a machine with two
  // kinds of cores decode may run on the fast kind only (a slow core holds
  // every thread at ggml's barrier) while prefill uses both. Empty = `cpus`.
  std::vector<int> cpus_batch;
  bool strict_cpu = false;  // one thread per listed CPU, in order
  int poll = 50;            // 0 = sleep between graphs, 100 = spin (ggml's scale)

  // Refuse to create the session when the estimated extra memory (KV +
  // compute) exceeds this many bytes. 0 = no check.
  uint64_t memory_budget_bytes = 0;

  // --- observation (imatrix) ---
  // ggml's scheduler evaluation callback: asked (ask=true) whether a graph node
  // is wanted, then called (ask=false) with its computed value. Engine-internal.
  bool (*eval_callback)(ggml_tensor* t, bool ask, void* user_data) = nullptr;
  void* eval_callback_data = nullptr;
};

class Session {
 public:
  // Errors: kInvalidArgument (bad option), kOutOfMemory (context does not fit),
  // kInternal (llama.cpp refused for another reason).
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<Model> model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }
  std::shared_ptr<Model> shared_model() const { return model_; }
  const SessionOptions& options() const { return options_; }
  uint32_t n_ctx() const;
  uint32_t n_batch() const;
  int threads() const { return options_.threads; }
  int threads_batch() const { return options_.threads_batch; }

  // Forget the KV cache of one sequence (or all when seq < 0).
  void ClearSequence(int seq);
  // Drop positions [p0, end) of a sequence: keeps a shared prefix cached.
  bool TruncateSequence(int seq, int p0);
  void CopySequence(int src, int dst, int p0, int p1);
  int SequenceLength(int seq) const;  // positions cached, 0 when empty
  int SequenceStart(int seq) const;   // the first position cached (> 0 when old cells were dropped)
  // The KV state of one sequence as bytes, in llama.cpp's own format: tied to
  // the model, the KV type and the attention layout (the caller keys it so).
  // Empty when the sequence is empty or llama.cpp cannot write it.
  std::vector<uint8_t> SaveSequence(int seq) const;
  // Replaces sequence `seq` with bytes from SaveSequence. False (and the
  // sequence left empty) when llama.cpp refuses them: damaged, from another
  // model or layout, or more cells than the sequence has room for.
  bool RestoreSequence(int seq, const uint8_t* data, size_t size);

  // Logits of the i-th output of the last Decode (vocab-sized), or nullptr.
  const float* Logits(int i) const;
  const float* Embeddings(int seq) const;  // pooled embedding of a sequence
  int n_vocab() const;
  int n_embd() const;

  // Called between graph computations; return true to abort the current Decode.
  void SetAbortCheck(std::function<bool()> should_abort);

  // llama_decode, with decode kept on its own CPUs: ggml pins the calling
  // thread only when a graph runs on several threads (OpenMP builds) and never
  // unpins it, so a one-thread decode after prefill would stay on prefill's
  // CPUs (perhaps the slow kind). Engine code decodes through this.
  int Decode(const llama_batch& batch);

  llama_context* raw() const { return ctx_; }

 private:
  Session() = default;
  std::shared_ptr<Model> model_;
  SessionOptions options_;
  llama_context* ctx_ = nullptr;
  ggml_threadpool* pool_decode_ = nullptr;
  ggml_threadpool* pool_batch_ = nullptr;
  std::vector<int> decode_cpus_;  // where a one-thread decode runs; empty: unpinned
  std::function<bool()> should_abort_;
};

// Physical core count as llama.cpp counts it (used for the threads default).
int DefaultThreadCount();

}  // namespace hone::engine
