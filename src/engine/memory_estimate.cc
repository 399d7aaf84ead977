#include "engine/memory_estimate.h"

#include <algorithm>

namespace hone::engine {

Result<double> KvTypeBytes(const std::string& t) {
  if (t == "f32") return 4.0;
  if (t == "f16" || t == "bf16") return 2.0;
  if (t == "q8_0") return 34.0 / 32;
  if (t == "q4_0") return 18.0 / 32;
  if (t == "q4_1") return 20.0 / 32;
  if (t == "q5_0") return 22.0 / 32;
  if (t == "q5_1") return 24.0 / 32;
  return MakeError(
      ErrorCode::kInvalidArgument,
      "unknown KV cache type '" + t + "' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)");
}

Result<MemoryEstimate> EstimateMemory(const GgufFile& g, const MemoryRequest& r) {
  auto kv_bytes = KvTypeBytes(r.kv_type);
  if (!kv_bytes) return kv_bytes.error();
  const int64_t n_embd = g.ArchInt("embedding_length").value_or(0);
  const int64_t n_layer = g.ArchInt("block_count").value_or(0);
  const int64_t n_head = g.ArchInt("attention.head_count").value_or(0);
  const int64_t n_head_kv = g.ArchInt("attention.head_count_kv").value_or(n_head);
  const int64_t n_ff = g.ArchInt("feed_forward_length").value_or(4 * n_embd);
  if (n_embd <= 0 || n_layer <= 0 || n_head <= 0) {
    return MakeError(ErrorCode::kCorrupt,
                     g.path + ": missing embedding_length/block_count/head_count metadata");
  }
  const int64_t head_k = g.ArchInt("attention.key_length").value_or(n_embd / n_head);
  const int64_t head_v = g.ArchInt("attention.value_length").value_or(n_embd / n_head);
  int64_t n_vocab = 0;
  for (auto& t : g.tensors) {
    if (t.name == "token_embd.weight" && t.shape.size() == 2) n_vocab = t.shape[1];
  }

  MemoryEstimate e;
  e.weights = g.tensor_bytes();
  e.kv_cache = static_cast<uint64_t>(static_cast<double>(n_layer) * r.n_ctx * n_head_kv * (head_k + head_v) *
                                     *kv_bytes);
  // The graph allocator reuses buffers, so the compute buffer is close to the
  // largest live set of one layer plus the output projection, not their sum.
  // Calibrated against llama.cpp's reported "CPU compute buffer size".
  const uint64_t ub = r.n_ubatch;
  const uint64_t f32 = 4;
  uint64_t logits = ub * n_vocab * f32;
  uint64_t ffn = ub * (2 * n_ff + 2 * n_embd) * f32;
  uint64_t attn = r.flash_attn ? ub * (n_head * head_v + 2 * n_embd) * f32
                               : ub * static_cast<uint64_t>(n_head) * r.n_ctx * f32 + ub * 2 * n_embd * f32;
  e.compute = std::max({logits + ub * n_embd * f32, ffn, attn});
  e.output = static_cast<uint64_t>(r.n_seq) * n_vocab * f32 + static_cast<uint64_t>(r.n_seq) * n_embd * f32;
  return e;
}

namespace {

// Bits per weight of llama.cpp's quantizations over a whole 7-8B model, as its
// quantize tool reports them (the K-quant mixes keep some matrices at a higher
// type). Only matrices are quantized; vectors (norms, biases) stay as they are.
struct QuantBits {
  const char* type;
  double bpw;
};
constexpr QuantBits kQuantBits[] = {{"Q8_0", 8.50},   {"Q6_K", 6.56},   {"Q5_K_M", 5.69},
                                    {"Q4_K_M", 4.89}, {"Q3_K_M", 3.91}, {"Q2_K", 3.35}};

}  // namespace

QuantFit LargestQuantThatFits(const GgufFile& g, const MemoryEstimate& now, uint64_t budget) {
  uint64_t matrix_elements = 0, vector_bytes = 0;
  for (const TensorInfo& t : g.tensors) {
    if (t.shape.size() >= 2) {
      matrix_elements += t.n_elements;
    } else {
      vector_bytes += t.n_bytes;
    }
  }
  QuantFit fit;
  fit.non_weights = now.total() - now.weights;
  for (const QuantBits& q : kQuantBits) {
    const uint64_t weights =
        static_cast<uint64_t>(static_cast<double>(matrix_elements) * q.bpw / 8) + vector_bytes;
    if (weights >= now.weights) continue;  // not smaller than the file as it is
    fit.total = weights + fit.non_weights;
    if (fit.total <= budget) {
      fit.type = q.type;
      return fit;
    }
  }
  return fit;
}

}  // namespace hone::engine
