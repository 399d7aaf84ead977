// Writes a synthetic GGUF: real tensor shapes and tokenizer, random weights.
//
// The file is written in one pass: the metadata (KVs + tensor infos) through
// gguf's own serializer, then each tensor's bytes generated block by block and
// appended at the offset gguf assigned it. A 7B model is ~15 GB, so nothing
// but a few blocks is ever held in memory.
#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "synth/gguf_writer.h"

namespace hone::synth {
namespace {

namespace fs = std::filesystem;

constexpr const char* kVocabFile = "models/ggml-vocab-qwen2.gguf";
constexpr int64_t kBlockElems = int64_t{1} << 20;  // per worker task; fixes the RNG stream layout
// Uniform in [-a, a] has std a/sqrt(3); 0.02 is the usual init std, small
// enough that 80 residual layers stay far from f16 overflow.
constexpr float kAmplitude = 0.02f * 1.7320508f;
// Token type for padding rows, as in llama.cpp's own ggml-vocab-qwen2.gguf.
constexpr int32_t kTokenTypeUserDefined = 4;

struct GgufDeleter {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;
struct GgmlDeleter {
  void operator()(ggml_context* ctx) const { ggml_free(ctx); }
};

struct WeightType {
  const char* name;
  ggml_type type;
  uint32_t file_type;  // llama_ftype: MOSTLY_F16 = 1, ALL_F32 = 0, MOSTLY_BF16 = 32
};
constexpr WeightType kWeightTypes[] = {
    {"f16", GGML_TYPE_F16, 1}, {"bf16", GGML_TYPE_BF16, 32}, {"f32", GGML_TYPE_F32, 0}};

Result<WeightType> ParseType(const std::string& name) {
  for (const WeightType& t : kWeightTypes) {
    if (name == t.name) return t;
  }
  return MakeError(ErrorCode::kInvalidArgument, "unknown weight type '" + name + "'; use f16, bf16 or f32");
}

struct TensorSpec {
  std::string name;
  int64_t ne0 = 0;      // row length (ggml's innermost dimension)
  int64_t ne1 = 1;      // rows; 1 for vectors
  bool matrix = false;  // matrices take the requested type; norms and biases stay F32 as in real files
  bool ones = false;    // RMS-norm weights are 1.0, everything else random
  int64_t elements() const { return ne0 * ne1; }
};

// Tensor names and shapes exactly as llama.cpp's qwen2 loader (src/models/qwen2.cpp) creates them.
std::vector<TensorSpec> TensorList(const Shape& s) {
  const int64_t kv_dim = s.n_embd / s.n_head * s.n_head_kv;
  std::vector<TensorSpec> list;
  auto matrix = [&](std::string name, int64_t ne0, int64_t ne1) {
    list.push_back({std::move(name), ne0, ne1, true, false});
  };
  auto vector = [&](std::string name, int64_t ne0, bool ones) {
    list.push_back({std::move(name), ne0, 1, false, ones});
  };

  matrix("token_embd.weight", s.n_embd, s.n_vocab);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".";
    vector(blk + "attn_norm.weight", s.n_embd, true);
    matrix(blk + "attn_q.weight", s.n_embd, s.n_embd);
    matrix(blk + "attn_k.weight", s.n_embd, kv_dim);
    matrix(blk + "attn_v.weight", s.n_embd, kv_dim);
    if (s.qkv_bias) {
      vector(blk + "attn_q.bias", s.n_embd, false);
      vector(blk + "attn_k.bias", kv_dim, false);
      vector(blk + "attn_v.bias", kv_dim, false);
    }
    matrix(blk + "attn_output.weight", s.n_embd, s.n_embd);
    vector(blk + "ffn_norm.weight", s.n_embd, true);
    matrix(blk + "ffn_gate.weight", s.n_embd, s.n_ff);
    matrix(blk + "ffn_up.weight", s.n_embd, s.n_ff);
    matrix(blk + "ffn_down.weight", s.n_ff, s.n_embd);
  }
  vector("output_norm.weight", s.n_embd, true);
  if (!s.tied_embeddings) matrix("output.weight", s.n_embd, s.n_vocab);
  return list;
}

// splitmix64: tiny, fast, and good enough for weights nobody will train.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline float Uniform(uint32_t bits) {
  return (static_cast<float>(bits >> 8) * (2.0f / 16777216.0f) - 1.0f) * kAmplitude;
}

// Fills one block of a tensor. Each (seed, tensor, block) has its own stream,
// so the bytes do not depend on how many threads generate them.
void FillBlock(const TensorSpec& spec, ggml_type type, uint64_t seed, uint64_t tensor_index,
               int64_t block_index, int64_t n, std::vector<float>& scratch, std::vector<uint8_t>& out) {
  scratch.resize(n);
  if (spec.ones) {
    std::fill(scratch.begin(), scratch.end(), 1.0f);
  } else {
    uint64_t mix = seed ^ (tensor_index << 40) ^ static_cast<uint64_t>(block_index);
    uint64_t state = SplitMix64(mix);
    for (int64_t i = 0; i < n; i += 2) {
      const uint64_t r = SplitMix64(state);
      scratch[i] = Uniform(static_cast<uint32_t>(r));
      if (i + 1 < n) scratch[i + 1] = Uniform(static_cast<uint32_t>(r >> 32));
    }
  }
  out.resize(n * ggml_type_size(type));
  switch (type) {
    case GGML_TYPE_F16:
      ggml_fp32_to_fp16_row(scratch.data(), reinterpret_cast<ggml_fp16_t*>(out.data()), n);
      break;
    case GGML_TYPE_BF16:  // the _ref variant: the AVX512 one flushes subnormals, changing bytes per CPU
      ggml_fp32_to_bf16_row_ref(scratch.data(), reinterpret_cast<ggml_bf16_t*>(out.data()), n);
      break;
    default:
      std::memcpy(out.data(), scratch.data(), n * sizeof(float));
  }
}

Result<GgufPtr> OpenVocab(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return MakeError(ErrorCode::kNotFound,
                     "vocab file '" + path + "' not found; pass a vocab-only GGUF (llama.cpp's " +
                         kVocabFile + ") or set HONE_LLAMA_SOURCE_DIR to a llama.cpp source tree");
  }
  gguf_init_params params = {/*no_alloc=*/true, /*ctx=*/nullptr};
  GgufPtr vocab(gguf_init_from_file(path.c_str(), params));
  if (!vocab) return MakeError(ErrorCode::kCorrupt, "'" + path + "' is not a readable GGUF file");
  const int64_t id = gguf_find_key(vocab.get(), "tokenizer.ggml.tokens");
  if (id < 0 || gguf_get_kv_type(vocab.get(), id) != GGUF_TYPE_ARRAY ||
      gguf_get_arr_type(vocab.get(), id) != GGUF_TYPE_STRING) {
    return MakeError(ErrorCode::kCorrupt, "'" + path + "' has no tokenizer.ggml.tokens string array");
  }
  return vocab;
}

// Pads a per-token array of 4-byte values (token types or scores) to n entries.
template <class T>
void PadTokenArray(gguf_context* ctx, const gguf_context* vocab, const char* key, gguf_type type, T pad,
                   size_t n) {
  const int64_t id = gguf_find_key(vocab, key);
  if (id < 0 || gguf_get_kv_type(vocab, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(vocab, id) != type) {
    return;
  }
  const T* data = static_cast<const T*>(gguf_get_arr_data(vocab, id));
  std::vector<T> values(data, data + gguf_get_arr_n(vocab, id));
  values.resize(n, pad);
  gguf_set_arr_data(ctx, key, type, values.data(), values.size());
}

// Copies every tokenizer.* KV (tokens, merges, special ids, chat template) and,
// when the embedding has more rows than the tokenizer has tokens, pads the
// token list with "[PADn]" entries so llama.cpp's n_vocab matches the rows.
Status CopyTokenizer(gguf_context* ctx, const gguf_context* vocab, const Shape& shape) {
  GgufPtr tokenizer(gguf_init_empty());
  gguf_set_kv(tokenizer.get(), vocab);
  for (int64_t i = gguf_get_n_kv(tokenizer.get()) - 1; i >= 0; --i) {
    const std::string key = gguf_get_key(tokenizer.get(), i);
    if (!key.starts_with("tokenizer.")) gguf_remove_key(tokenizer.get(), key.c_str());
  }
  gguf_set_kv(ctx, tokenizer.get());

  const int64_t tokens_id = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  const size_t n_tokens = gguf_get_arr_n(vocab, tokens_id);
  const size_t n_rows = static_cast<size_t>(shape.n_vocab);
  if (n_tokens > n_rows) {
    return MakeError(ErrorCode::kInvalidArgument, "the vocab has " + std::to_string(n_tokens) +
                                                      " tokens but shape '" + shape.name + "' has only " +
                                                      std::to_string(n_rows) + " embedding rows");
  }
  if (n_tokens == n_rows) return Status::Ok();

  std::vector<std::string> pads;
  for (size_t i = n_tokens; i < n_rows; ++i) pads.push_back("[PAD" + std::to_string(i) + "]");
  std::vector<const char*> tokens(n_rows);
  for (size_t i = 0; i < n_tokens; ++i) tokens[i] = gguf_get_arr_str(vocab, tokens_id, i);
  for (size_t i = n_tokens; i < n_rows; ++i) tokens[i] = pads[i - n_tokens].c_str();
  gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", tokens.data(), tokens.size());
  PadTokenArray<int32_t>(ctx, vocab, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, kTokenTypeUserDefined,
                         n_rows);
  PadTokenArray<float>(ctx, vocab, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 0.0f, n_rows);
  return Status::Ok();
}

// Qwen2.5's added tokens after the three llama.cpp's Qwen2 vocab has (151643
// <|endoftext|> to 151645 <|im_end|>), at their real ids, with the token
// types llama.cpp's converter gives them (special ones as control tokens).
struct AddedToken {
  const char* text;
  int32_t type;
};
constexpr int32_t kQwenFirstAdded = 151646;
constexpr int32_t kTokenTypeControl = 3;
constexpr AddedToken kQwen25Added[] = {
    {"<|object_ref_start|>", kTokenTypeControl}, {"<|object_ref_end|>", kTokenTypeControl},
    {"<|box_start|>", kTokenTypeControl},        {"<|box_end|>", kTokenTypeControl},
    {"<|quad_start|>", kTokenTypeControl},       {"<|quad_end|>", kTokenTypeControl},
    {"<|vision_start|>", kTokenTypeControl},     {"<|vision_end|>", kTokenTypeControl},
    {"<|vision_pad|>", kTokenTypeControl},       {"<|image_pad|>", kTokenTypeControl},
    {"<|video_pad|>", kTokenTypeControl},        {"<tool_call>", kTokenTypeUserDefined},
    {"</tool_call>", kTokenTypeUserDefined},     {"<|fim_prefix|>", kTokenTypeUserDefined},
    {"<|fim_middle|>", kTokenTypeUserDefined},   {"<|fim_suffix|>", kTokenTypeUserDefined},
    {"<|fim_pad|>", kTokenTypeUserDefined},      {"<|repo_name|>", kTokenTypeUserDefined},
    {"<|file_sep|>", kTokenTypeUserDefined},
};

// Makes a Qwen2-shaped model an instruct one as Qwen2.5 ships it: the added
// tokens above (tool-call markers among them) and Qwen2.5-Instruct's chat
// template, with tools, from llama.cpp's models/templates beside the vocab.
// Without that file the vocab's plain ChatML template stays.
void MakeQwen25Instruct(gguf_context* ctx, const Shape& shape, const std::string& vocab_path) {
  const int64_t tokens_id = gguf_find_key(ctx, "tokenizer.ggml.tokens");
  const int64_t types_id = gguf_find_key(ctx, "tokenizer.ggml.token_type");
  const size_t n_added = sizeof kQwen25Added / sizeof kQwen25Added[0];
  if (shape.arch != "qwen2" || tokens_id < 0 || types_id < 0 ||
      gguf_get_arr_n(ctx, tokens_id) < kQwenFirstAdded + n_added ||
      gguf_get_arr_str(ctx, tokens_id, kQwenFirstAdded - 1) != std::string("<|im_end|>")) {
    return;
  }
  const size_t n = gguf_get_arr_n(ctx, tokens_id);
  std::vector<std::string> texts(n);
  for (size_t i = 0; i < n; ++i) texts[i] = gguf_get_arr_str(ctx, tokens_id, i);
  const int32_t* t = static_cast<const int32_t*>(gguf_get_arr_data(ctx, types_id));
  std::vector<int32_t> types(t, t + n);
  for (size_t i = 0; i < n_added; ++i) {
    texts[kQwenFirstAdded + i] = kQwen25Added[i].text;
    types[kQwenFirstAdded + i] = kQwen25Added[i].type;
  }
  std::vector<const char*> ptrs(n);
  for (size_t i = 0; i < n; ++i) ptrs[i] = texts[i].c_str();
  gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", ptrs.data(), n);
  gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), n);

  const fs::path tmpl = fs::path(vocab_path).parent_path() / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja";
  std::ifstream in(tmpl);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  gguf_set_val_str(ctx, "tokenizer.chat_template", text.str().c_str());
}

void SetModelKvs(gguf_context* ctx, const Shape& s, const WeightType& type, uint64_t seed) {
  const std::string a = s.arch + ".";
  gguf_set_val_str(ctx, "general.architecture", s.arch.c_str());
  gguf_set_val_str(ctx, "general.name", ("synth " + s.name).c_str());
  gguf_set_val_u32(ctx, "general.file_type", type.file_type);
  gguf_set_val_u32(ctx, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
  gguf_set_val_u32(ctx, (a + "context_length").c_str(), static_cast<uint32_t>(s.n_ctx_train));
  gguf_set_val_u32(ctx, (a + "embedding_length").c_str(), static_cast<uint32_t>(s.n_embd));
  gguf_set_val_u32(ctx, (a + "block_count").c_str(), static_cast<uint32_t>(s.n_layer));
  gguf_set_val_u32(ctx, (a + "feed_forward_length").c_str(), static_cast<uint32_t>(s.n_ff));
  gguf_set_val_u32(ctx, (a + "attention.head_count").c_str(), static_cast<uint32_t>(s.n_head));
  gguf_set_val_u32(ctx, (a + "attention.head_count_kv").c_str(), static_cast<uint32_t>(s.n_head_kv));
  gguf_set_val_f32(ctx, (a + "rope.freq_base").c_str(), s.rope_freq_base);
  gguf_set_val_f32(ctx, (a + "attention.layer_norm_rms_epsilon").c_str(), s.rms_norm_eps);
  // Marks the file as synthetic so no tool mistakes its outputs for a model's.
  gguf_set_val_str(ctx, "hone.synth.like", s.name.c_str());
  gguf_set_val_u64(ctx, "hone.synth.seed", seed);
}

// Generates every tensor's bytes and appends them at gguf's offsets. Blocks
// are generated on up to `threads` workers, then written in order.
Status WriteTensorData(GgufStreamWriter& out, const gguf_context* ctx, const std::vector<TensorSpec>& specs,
                       const std::vector<ggml_type>& types, uint64_t seed,
                       const std::function<void(double)>& on_progress) {
  uint64_t total_bytes = 0, done_bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) total_bytes += specs[i].elements() * ggml_type_size(types[i]);

  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  std::vector<std::vector<uint8_t>> bufs(threads);
  std::vector<std::vector<float>> scratch(threads);

  for (size_t t = 0; t < specs.size(); ++t) {
    Status s = out.BeginTensor(ctx, static_cast<int64_t>(t));
    if (!s.ok()) return s;
    const int64_t n = specs[t].elements();
    const int64_t n_blocks = (n + kBlockElems - 1) / kBlockElems;
    for (int64_t b0 = 0; b0 < n_blocks; b0 += threads) {
      const int group = static_cast<int>(std::min<int64_t>(threads, n_blocks - b0));
      auto fill = [&](int j) {
        const int64_t b = b0 + j;
        const int64_t count = std::min(kBlockElems, n - b * kBlockElems);
        FillBlock(specs[t], types[t], seed, t, b, count, scratch[j], bufs[j]);
      };
      {
        std::vector<std::jthread> workers;
        for (int j = 1; j < group; ++j) workers.emplace_back(fill, j);
        fill(0);
      }  // jthreads join here
      for (int j = 0; j < group; ++j) {
        s = out.Write(bufs[j].data(), bufs[j].size());
        if (!s.ok()) return s;
        done_bytes += bufs[j].size();
      }
      if (on_progress) on_progress(static_cast<double>(done_bytes) / static_cast<double>(total_bytes));
    }
  }
  return Status::Ok();
}

Result<SynthReport> SynthesizeImpl(const SynthOptions& options) {
  Result<Shape> shape = FindShape(options.like);
  if (!shape.ok()) return shape.error();
  Result<WeightType> type = ParseType(options.type);
  if (!type.ok()) return type.error();
  if (options.out_path.empty()) return MakeError(ErrorCode::kInvalidArgument, "no output path given");

  std::string vocab_path = options.vocab_path;
  if (vocab_path.empty()) {
    Result<std::string> found = FindDefaultVocab();
    if (!found.ok()) return found.error();
    vocab_path = found.value();
  }
  Result<GgufPtr> vocab = OpenVocab(vocab_path);
  if (!vocab.ok()) return vocab.error();

  GgufPtr ctx(gguf_init_empty());
  SetModelKvs(ctx.get(), *shape, *type, options.seed);
  Status copied = CopyTokenizer(ctx.get(), vocab->get(), *shape);
  if (!copied.ok()) return copied.error();
  MakeQwen25Instruct(ctx.get(), *shape, vocab_path);

  // gguf_add_tensor wants ggml tensors; a no_alloc context holds just their headers.
  const std::vector<TensorSpec> specs = TensorList(*shape);
  ggml_init_params params = {specs.size() * ggml_tensor_overhead(), nullptr, /*no_alloc=*/true};
  std::unique_ptr<ggml_context, GgmlDeleter> meta(ggml_init(params));
  if (!meta) return MakeError(ErrorCode::kOutOfMemory, "cannot allocate tensor metadata");
  std::vector<ggml_type> types;
  SynthReport report;
  for (const TensorSpec& spec : specs) {
    const ggml_type t = spec.matrix ? type->type : GGML_TYPE_F32;
    ggml_tensor* tensor = spec.matrix ? ggml_new_tensor_2d(meta.get(), t, spec.ne0, spec.ne1)
                                      : ggml_new_tensor_1d(meta.get(), t, spec.ne0);
    ggml_set_name(tensor, spec.name.c_str());
    gguf_add_tensor(ctx.get(), tensor);
    types.push_back(t);
    report.n_params += static_cast<uint64_t>(spec.elements());
  }
  if (shape->expected_params != 0 && report.n_params != shape->expected_params) {
    return MakeError(ErrorCode::kInternal, "shape '" + shape->name + "' produced " +
                                               std::to_string(report.n_params) + " parameters, expected " +
                                               std::to_string(shape->expected_params));
  }

  GgufStreamWriter out(options.out_path);
  Status s = out.WriteMetadata(ctx.get());
  if (!s.ok()) return s.error();
  s = WriteTensorData(out, ctx.get(), specs, types, options.seed, options.on_progress);
  if (!s.ok()) return s.error();
  s = out.Finish();
  if (!s.ok()) return s.error();
  report.file_bytes = out.bytes_written();

  report.path = options.out_path;
  report.n_tensors = static_cast<int>(specs.size());
  return report;
}

}  // namespace

Result<SynthReport> Synthesize(const SynthOptions& options) {
  try {
    return SynthesizeImpl(options);
  } catch (const std::bad_alloc&) {
    return MakeError(ErrorCode::kOutOfMemory, "out of memory while synthesizing " + options.like);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("synth failed: ") + e.what());
  }
}

Result<std::string> FindDefaultVocab() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("HONE_LLAMA_SOURCE_DIR"); env && *env) {
    candidates.push_back(fs::path(env) / kVocabFile);
  }
#ifdef HONE_LLAMA_SOURCE_DIR
  if (std::strlen(HONE_LLAMA_SOURCE_DIR) > 0)
    candidates.push_back(fs::path(HONE_LLAMA_SOURCE_DIR) / kVocabFile);
#endif
  std::string cache_glob = "~/.cache/hone/llama.cpp/*/src";
  if (const char* home = std::getenv("HOME"); home && *home) {
    const fs::path cache = fs::path(home) / ".cache/hone/llama.cpp";
    cache_glob = (cache / "*/src").string();
    std::vector<fs::path> builds;
    std::error_code ec;
    for (fs::directory_iterator it(cache, ec), end; !ec && it != end; it.increment(ec)) {
      builds.push_back(it->path() / "src" / kVocabFile);
    }
    std::sort(builds.begin(), builds.end());  // deterministic choice when several pins exist
    candidates.insert(candidates.end(), builds.begin(), builds.end());
  }

  std::string looked;
  for (const fs::path& path : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path.string();
    looked += "\n  " + path.string();
  }
  return MakeError(
      ErrorCode::kNotFound,
      std::string("cannot find llama.cpp's ") + kVocabFile + "; looked in $HONE_LLAMA_SOURCE_DIR, " +
          "the build's llama.cpp source dir and " + cache_glob + ":" +
          (looked.empty() ? std::string("\n  (no candidates)") : looked) +
          "\nRun scripts/build-llama.sh, set HONE_LLAMA_SOURCE_DIR to a llama.cpp source tree, " +
          "or pass the vocab GGUF's path explicitly.");
}

}  // namespace hone::synth
