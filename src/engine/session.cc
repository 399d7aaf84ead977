#include "engine/session.h"

#include <ggml-cpu.h>
#include <llama.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "engine/backend.h"
#include "engine/memory_estimate.h"

namespace hone::engine {
namespace {

Result<ggml_type> KvType(const std::string& name) {
  if (name == "f32") return GGML_TYPE_F32;
  if (name == "f16") return GGML_TYPE_F16;
  if (name == "bf16") return GGML_TYPE_BF16;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  if (name == "q4_0") return GGML_TYPE_Q4_0;
  if (name == "q4_1") return GGML_TYPE_Q4_1;
  if (name == "q5_0") return GGML_TYPE_Q5_0;
  if (name == "q5_1") return GGML_TYPE_Q5_1;
  return MakeError(
      ErrorCode::kInvalidArgument,
      "unknown KV cache type '" + name + "' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)");
}

ggml_threadpool* MakePool(const std::vector<int>& cpus, int n_threads, bool strict, int poll) {
  ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
  for (int c : cpus) {
    if (c >= 0 && c < GGML_MAX_N_THREADS) p.cpumask[c] = true;
  }
  p.strict_cpu = strict;
  p.poll = static_cast<uint32_t>(std::clamp(poll, 0, 100));
  return ggml_threadpool_new(&p);
}

bool AbortTrampoline(void* data) {
  auto* fn = static_cast<std::function<bool()>*>(data);
  return *fn && (*fn)();
}

// MemAvailable from /proc/meminfo; 0 when unknown. The engine's own last line
// of defence: callers with a better figure (cgroup limits) pass a budget.
uint64_t AvailableMemoryBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// auto is hone's choice, not llama.cpp's (which turns it on for the CPU):
// ggml's CPU flash attention is slower than plain attention wherever a
// decode step runs: one token at some depth, and speculative verification
// batches of 2-63 tokens (its tiled kernel needs 64 query rows,
// GGML_FA_TILE_Q). On the pinned tree (llama-bench, 2-core Xeon, synthetic
// Qwen2.5-0.5B Q4_K_M): decode at depth 1024 10.4 tok/s with it, 17.2
// without; 16 tokens at depth 512 37 vs 109 tok/s; only a 512-token prefill
// gains (115 vs 107). A quantized V cache needs it, so there auto stays
// llama.cpp's. `hone tune` measures `on` against it.
llama_flash_attn_type FlashAttnType(FlashAttn fa, ggml_type type_v) {
  if (fa == FlashAttn::kOn) return LLAMA_FLASH_ATTN_TYPE_ENABLED;
  if (fa == FlashAttn::kOff) return LLAMA_FLASH_ATTN_TYPE_DISABLED;
  const bool plain_v = type_v == GGML_TYPE_F16 || type_v == GGML_TYPE_F32 || type_v == GGML_TYPE_BF16;
  return plain_v ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_AUTO;
}

}  // namespace

const char* FlashAttnName(FlashAttn f) {
  switch (f) {
    case FlashAttn::kAuto:
      return "auto";
    case FlashAttn::kOn:
      return "on";
    case FlashAttn::kOff:
      return "off";
  }
  return "?";
}

Result<FlashAttn> ParseFlashAttn(const std::string& s) {
  if (s == "auto") return FlashAttn::kAuto;
  if (s == "on" || s == "1" || s == "true") return FlashAttn::kOn;
  if (s == "off" || s == "0" || s == "false") return FlashAttn::kOff;
  return MakeError(ErrorCode::kInvalidArgument, "flash attention must be auto, on or off, not '" + s + "'");
}

int DefaultThreadCount() {
  // Count distinct (package, core) pairs: SMT siblings share a core, and on
  // CPU-bound matmuls a second hyperthread rarely helps.
  std::set<std::pair<std::string, std::string>> cores;
  for (unsigned cpu = 0; cpu < 4096; ++cpu) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    if (!core) {
      if (cpu > 0) break;
      continue;
    }
    std::string c, p;
    core >> c;
    pkg >> p;
    cores.insert({p, c});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
}

namespace {

enum llama_pooling_type PoolingType(Pooling p) {
  switch (p) {
    case Pooling::kModelDefault:
      return LLAMA_POOLING_TYPE_UNSPECIFIED;
    case Pooling::kNone:
      return LLAMA_POOLING_TYPE_NONE;
    case Pooling::kMean:
      return LLAMA_POOLING_TYPE_MEAN;
    case Pooling::kCls:
      return LLAMA_POOLING_TYPE_CLS;
    case Pooling::kLast:
      return LLAMA_POOLING_TYPE_LAST;
  }
  return LLAMA_POOLING_TYPE_UNSPECIFIED;
}

// KV cache, compute and output buffers against the memory left: refused here
// with a clear message rather than after minutes of page-faulting.
Status CheckFits(const Model& model, const SessionOptions& opt) {
  MemoryRequest req{opt.n_ctx, opt.n_ubatch, opt.n_seq_max, opt.kv_type_k, opt.flash_attn == FlashAttn::kOn};
  // llama.cpp only fails such a context after minutes of page-faulting (or
  // the OOM killer ends the process), so refuse it up front.
  const uint64_t budget = opt.memory_budget_bytes ? opt.memory_budget_bytes : AvailableMemoryBytes();
  if (auto est = EstimateMemory(model.gguf(), req); est && budget > 0) {
    uint64_t extra = est->kv_cache + est->compute + est->output;
    if (extra > budget) {
      return MakeError(ErrorCode::kOutOfMemory, "a context of " + std::to_string(opt.n_ctx) +
                                                    " tokens needs about " + std::to_string(extra >> 20) +
                                                    " MiB (KV cache " + std::to_string(est->kv_cache >> 20) +
                                                    " MiB) but only " + std::to_string(budget >> 20) +
                                                    " MiB is available; use a smaller context");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<Model> model, const SessionOptions& opt_in) {
  EnsureBackend();
  SessionOptions opt = opt_in;
  if (opt.threads <= 0) opt.threads = DefaultThreadCount();
  if (opt.threads_batch <= 0) opt.threads_batch = opt.threads;
  if (opt.n_seq_max == 0) return MakeError(ErrorCode::kInvalidArgument, "n_seq_max must be at least 1");
  if (opt.n_ubatch == 0 || opt.n_batch == 0)
    return MakeError(ErrorCode::kInvalidArgument, "batch sizes must be > 0");
  opt.n_ubatch = std::min(opt.n_ubatch, opt.n_batch);
  if (opt.n_ctx == 0) opt.n_ctx = std::max(model->info().n_ctx_train, 512);
  auto tk = KvType(opt.kv_type_k);
  if (!tk) return tk.error();
  auto tv = KvType(opt.kv_type_v);
  if (!tv) return tv.error();

  if (Status fits = CheckFits(*model, opt); !fits) return fits.error();

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = opt.n_ctx;
  cp.n_batch = opt.n_batch;
  cp.n_ubatch = opt.n_ubatch;
  cp.n_seq_max = opt.n_seq_max;
  cp.kv_unified = opt.kv_unified;
  cp.n_threads = opt.threads;
  cp.n_threads_batch = opt.threads_batch;
  cp.type_k = *tk;
  cp.type_v = *tv;
  cp.flash_attn_type = FlashAttnType(opt.flash_attn, *tv);
  cp.embeddings = opt.embeddings;
  cp.pooling_type = PoolingType(opt.pooling);
  cp.no_perf = true;
  cp.cb_eval = opt.eval_callback;
  cp.cb_eval_user_data = opt.eval_callback_data;

  std::unique_ptr<Session> s(new Session());
  s->model_ = std::move(model);
  s->options_ = opt;
  cp.abort_callback = &AbortTrampoline;
  cp.abort_callback_data = &s->should_abort_;

  TakeRecentLlamaErrors();
  s->ctx_ = llama_init_from_model(s->model_->raw(), cp);
  if (!s->ctx_) {
    std::string why = TakeRecentLlamaErrors();
    bool oom = why.find("alloc") != std::string::npos || why.find("memory") != std::string::npos;
    return MakeError(oom ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
                     "cannot create a context of " + std::to_string(opt.n_ctx) + " tokens" +
                         (oom ? " (not enough memory; use a smaller context)" : "") +
                         (why.empty() ? "" : ": " + why));
  }
  // Attach our own ggml thread pools, as llama-bench does: they carry the CPU
  // placement (and strictness), which ggml applies to its workers. On an
  // OpenMP build (the default) OpenMP's threads do the work and take that
  // placement, but the poll level has no effect (see UsesOpenMp).
  std::vector<int> decode_cpus(opt.cpus.begin(),
                               opt.cpus.begin() + std::min<size_t>(opt.cpus.size(), opt.threads));
  s->pool_decode_ = MakePool(decode_cpus, opt.threads, opt.strict_cpu, opt.poll);
  if (opt.threads == 1) s->decode_cpus_ = decode_cpus;
  const bool own_batch_pool = opt.threads_batch != opt.threads || !opt.cpus_batch.empty();
  if (own_batch_pool) {
    s->pool_batch_ = MakePool(opt.cpus_batch.empty() ? opt.cpus : opt.cpus_batch, opt.threads_batch,
                              opt.strict_cpu, opt.poll);
  }
  if (!s->pool_decode_ || (own_batch_pool && !s->pool_batch_)) {
    return MakeError(ErrorCode::kInternal, "cannot create the CPU thread pool");
  }
  llama_attach_threadpool(s->ctx_, s->pool_decode_, s->pool_batch_ ? s->pool_batch_ : s->pool_decode_);
  return s;
}

int Session::Decode(const llama_batch& batch) {
  // llama.cpp runs a one-token batch on the decode pool, anything longer on
  // the prefill pool. With one decode thread ggml never applies the decode
  // pool's mask, so it is applied here (one cheap syscall per token).
  if (batch.n_tokens == 1 && !decode_cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : decode_cpus_)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort, as ggml's own
  }
  return llama_decode(ctx_, batch);
}

Session::~Session() {
  if (ctx_) {
    if (pool_decode_) llama_detach_threadpool(ctx_);
    llama_free(ctx_);
  }
  if (pool_batch_) ggml_threadpool_free(pool_batch_);
  if (pool_decode_) ggml_threadpool_free(pool_decode_);
}

uint32_t Session::n_ctx() const { return llama_n_ctx(ctx_); }
uint32_t Session::n_batch() const { return llama_n_batch(ctx_); }
int Session::n_vocab() const { return llama_vocab_n_tokens(model_->vocab()); }
int Session::n_embd() const { return llama_model_n_embd(model_->raw()); }

void Session::ClearSequence(int seq) {
  if (seq < 0)
    llama_memory_clear(llama_get_memory(ctx_), true);
  else
    llama_memory_seq_rm(llama_get_memory(ctx_), seq, -1, -1);
}

bool Session::TruncateSequence(int seq, int p0) {
  return llama_memory_seq_rm(llama_get_memory(ctx_), seq, p0, -1);
}

void Session::CopySequence(int src, int dst, int p0, int p1) {
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, p0, p1);
}

int Session::SequenceLength(int seq) const {
  return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq) + 1;
}

std::vector<uint8_t> Session::SaveSequence(int seq) const {
  std::vector<uint8_t> out(llama_state_seq_get_size(ctx_, seq));
  if (out.empty()) return out;
  const size_t n = llama_state_seq_get_data(ctx_, out.data(), out.size(), seq);
  if (n == 0) return {};
  out.resize(n);
  return out;
}

bool Session::RestoreSequence(int seq, const uint8_t* data, size_t size) {
  ClearSequence(seq);
  if (llama_state_seq_set_data(ctx_, data, size, seq) == size) return true;
  ClearSequence(seq);  // a refused state may leave part of itself behind
  return false;
}

int Session::SequenceStart(int seq) const { return llama_memory_seq_pos_min(llama_get_memory(ctx_), seq); }

const float* Session::Logits(int i) const { return llama_get_logits_ith(ctx_, i); }
const float* Session::Embeddings(int seq) const { return llama_get_embeddings_seq(ctx_, seq); }

void Session::SetAbortCheck(std::function<bool()> should_abort) { should_abort_ = std::move(should_abort); }

}  // namespace hone::engine
