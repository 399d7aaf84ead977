// `hone synth`: writes a GGUF with exactly the tensor shapes of a real model
// family and random weights, plus the real tokenizer and chat template, so it
// benchmarks like the real thing with nothing downloaded.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::synth {

// The architecture hyper-parameters that decide every tensor shape.
struct Shape {
  std::string name;          // "qwen2.5-0.5b"
  std::string arch;          // GGUF general.architecture, e.g. "qwen2"
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;       // rows of token_embd (may exceed the tokenizer's count, as in Qwen2.5)
  int64_t n_ctx_train = 0;
  bool tied_embeddings = true;
  bool qkv_bias = true;
  float rope_freq_base = 1000000.0f;
  float rms_norm_eps = 1e-6f;
  uint64_t expected_params = 0;  // for self-checks (0 = unknown)
};

// Known shapes: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, tiny.
const std::vector<Shape>& KnownShapes();
Result<Shape> FindShape(const std::string& name);
uint64_t ParameterCount(const Shape& shape);

struct SynthOptions {
  std::string like = "qwen2.5-0.5b";
  std::string out_path;
  std::string type = "f16";           // f16, bf16 or f32 for the weight matrices
  uint64_t seed = 42;
  // The vocab-only GGUF the tokenizer and chat template come from; empty =
  // llama.cpp's models/ggml-vocab-qwen2.gguf found next to the pinned build.
  std::string vocab_path;
  std::function<void(double)> on_progress;  // 0..1, called from the writer thread
};

struct SynthReport {
  std::string path;
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  int n_tensors = 0;
};

Result<SynthReport> Synthesize(const SynthOptions& options);

// Locates models/ggml-vocab-qwen2.gguf: $HONE_LLAMA_SOURCE_DIR, the compiled-in
// source dir, then ~/.cache/hone/llama.cpp/*/src.
Result<std::string> FindDefaultVocab();

}  // namespace hone::synth
