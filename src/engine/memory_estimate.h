// How much RAM a model needs for a given context, from GGUF metadata alone.
// Used by `hone inspect` and by the server's admission check before loading.
#pragma once

#include <cstdint>
#include <string>

#include "engine/gguf_file.h"
#include "util/result.h"

namespace hone::engine {

struct MemoryRequest {
  uint32_t n_ctx = 4096;        // total KV cells (all sequences together)
  uint32_t n_ubatch = 512;      // physical batch: sizes the compute buffer
  uint32_t n_seq = 1;           // parallel sequences: sizes the logits buffer
  std::string kv_type = "f16";  // f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1
  bool flash_attn = false;      // without it the KQ matrix is materialised
};

struct MemoryEstimate {
  uint64_t weights = 0;   // tensor data (mmap'd or copied)
  uint64_t kv_cache = 0;  // K and V for every layer and cell
  uint64_t compute = 0;   // scheduler's compute buffer at n_ubatch
  uint64_t output = 0;    // logits/embeddings host buffer
  uint64_t total() const { return weights + kv_cache + compute + output; }
};

// Bytes per element for a KV cache type name; error for unknown names.
Result<double> KvTypeBytes(const std::string& kv_type);

Result<MemoryEstimate> EstimateMemory(const GgufFile& file, const MemoryRequest& request);

// When a model does not fit: the most precise of llama.cpp's usual
// quantizations (Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q3_K_M, Q2_K) that is smaller than
// the file is now and whose weights, with the same context, KV and compute
// buffers, fit `budget` bytes. `type` is empty when none would.
struct QuantFit {
  std::string type;          // "Q4_K_M"; empty when even the smallest does not fit
  uint64_t total = 0;        // its estimated total, or the smallest's when none fits
  uint64_t non_weights = 0;  // KV + compute + output: what a smaller context saves
};
QuantFit LargestQuantThatFits(const GgufFile& file, const MemoryEstimate& now, uint64_t budget);

}  // namespace hone::engine
