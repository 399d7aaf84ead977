// The model families `hone synth` can imitate. The numbers come from each
// model's published config.json; expected_params is what Hugging Face reports
// for the real checkpoint, so ParameterCount() can be checked against reality.
#include <string>
#include <vector>

#include "synth/synth.h"

namespace hone::synth {
namespace {

Shape Qwen2(std::string name, int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
            int64_t n_ff, int64_t n_vocab, bool tied, uint64_t expected_params) {
  Shape s;
  s.name = std::move(name);
  s.arch = "qwen2";
  s.n_embd = n_embd;
  s.n_layer = n_layer;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.n_ff = n_ff;
  s.n_vocab = n_vocab;
  s.n_ctx_train = 32768;
  s.tied_embeddings = tied;
  s.qkv_bias = true;
  s.rope_freq_base = 1000000.0f;
  s.rms_norm_eps = 1e-6f;
  s.expected_params = expected_params;
  return s;
}

}  // namespace

const std::vector<Shape>& KnownShapes() {
  // Qwen2.5 pads its embedding matrix to 151936 rows (152064 for 7B), more
  // than the tokenizer has; the writer pads the token list to match, exactly
  // as convert_hf_to_gguf.py does for the real models.
  static const std::vector<Shape> shapes = {
      Qwen2("qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, true, 494032768ull),
      Qwen2("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936, true, 1543714304ull),
      Qwen2("qwen2.5-3b", 2048, 36, 16, 2, 11008, 151936, true, 3085938688ull),
      Qwen2("qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, false, 7615616512ull),
      // Test-sized: every tensor kind of the real family, but ~10 M parameters
      // (almost all in the embedding, which the real tokenizer forces).
      Qwen2("tiny", 64, 2, 4, 2, 128, 151936, true, 9798208ull),
  };
  return shapes;
}

Result<Shape> FindShape(const std::string& name) {
  std::string known;
  for (const Shape& shape : KnownShapes()) {
    if (shape.name == name) return shape;
    known += (known.empty() ? "" : ", ") + shape.name;
  }
  return MakeError(ErrorCode::kNotFound, "unknown model shape '" + name + "'; known shapes: " + known);
}

uint64_t ParameterCount(const Shape& s) {
  const uint64_t head_dim = s.n_head > 0 ? s.n_embd / s.n_head : 0;
  const uint64_t kv_dim = head_dim * s.n_head_kv;
  const uint64_t embd = s.n_embd;

  uint64_t per_layer = 0;
  per_layer += 2 * embd;           // attn_norm, ffn_norm
  per_layer += embd * embd;        // attn_q
  per_layer += 2 * embd * kv_dim;  // attn_k, attn_v
  per_layer += embd * embd;        // attn_output
  per_layer += 3 * embd * s.n_ff;  // ffn_gate, ffn_up, ffn_down
  if (s.qkv_bias) per_layer += embd + 2 * kv_dim;

  uint64_t total = embd * s.n_vocab;                  // token_embd
  if (!s.tied_embeddings) total += embd * s.n_vocab;  // output
  total += embd;                                      // output_norm
  total += per_layer * s.n_layer;
  return total;
}

}  // namespace hone::synth
