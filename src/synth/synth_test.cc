// Tests for hone synth: shapes and parameter counts, and the GGUF it writes,
// re-read through ggml's own gguf reader exactly as llama.cpp reads it.
#include "synth/synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "testing/test_env.h"

namespace hone::synth {
namespace {

namespace fs = std::filesystem;
using hone::testing::ReadFile;
using hone::testing::TempPath;

struct Gguf {
  gguf_context* gguf = nullptr;
  ggml_context* ggml = nullptr;  // tensor data, when loaded with data
  ~Gguf() {
    if (gguf) gguf_free(gguf);
    if (ggml) ggml_free(ggml);
  }
};

std::unique_ptr<Gguf> Open(const std::string& path, bool with_data) {
  auto g = std::make_unique<Gguf>();
  gguf_init_params params = {/*no_alloc=*/!with_data, with_data ? &g->ggml : nullptr};
  g->gguf = gguf_init_from_file(path.c_str(), params);
  return g;
}

std::string StrKv(const gguf_context* ctx, const char* key) {
  const int64_t id = gguf_find_key(ctx, key);
  if (id < 0 || gguf_get_kv_type(ctx, id) != GGUF_TYPE_STRING) return "<missing>";
  return gguf_get_val_str(ctx, id);
}

uint32_t U32Kv(const gguf_context* ctx, const char* key) {
  const int64_t id = gguf_find_key(ctx, key);
  if (id < 0 || gguf_get_kv_type(ctx, id) != GGUF_TYPE_UINT32) return 0xffffffffu;
  return gguf_get_val_u32(ctx, id);
}

size_t TokenCount(const gguf_context* ctx) {
  const int64_t id = gguf_find_key(ctx, "tokenizer.ggml.tokens");
  return id < 0 ? 0 : gguf_get_arr_n(ctx, id);
}

// Each test's scratch files are deleted afterwards: the tiny models are
// 25-45 MB each and nothing else reads them.
class SynthTest : public ::testing::Test {
 protected:
  std::string Scratch(const std::string& name) {
    scratch_.push_back(TempPath(name));
    return scratch_.back();
  }
  void TearDown() override {
    std::error_code ec;
    for (const std::string& path : scratch_) fs::remove_all(path, ec);
  }

  // Synthesizes the tiny shape; fails the test if that fails.
  SynthReport SynthTiny(const std::string& name, uint64_t seed, const std::string& type = "f16") {
    SynthOptions options;
    options.like = "tiny";
    options.out_path = Scratch(name);
    options.type = type;
    options.seed = seed;
    Result<SynthReport> report = Synthesize(options);
    EXPECT_TRUE(report.ok()) << report.error().ToString();
    return report.ok() ? report.value() : SynthReport{};
  }

  // A minimal vocab-only GGUF with n_tokens made-up tokens.
  std::string WriteVocab(const std::string& name, size_t n_tokens) {
    std::vector<std::string> tokens;
    for (size_t i = 0; i < n_tokens; ++i) tokens.push_back("t" + std::to_string(i));
    std::vector<const char*> ptrs;
    for (const std::string& t : tokens) ptrs.push_back(t.c_str());
    std::vector<int32_t> types(n_tokens, 1);
    gguf_context* ctx = gguf_init_empty();
    gguf_set_val_str(ctx, "general.architecture", "qwen2");
    gguf_set_val_str(ctx, "tokenizer.ggml.model", "gpt2");
    gguf_set_arr_str(ctx, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    const std::string path = Scratch(name);
    EXPECT_TRUE(gguf_write_to_file(ctx, path.c_str(), false));
    gguf_free(ctx);
    return path;
  }

 private:
  std::vector<std::string> scratch_;
};
using SynthWrite = SynthTest;
using SynthErrors = SynthTest;
using SynthVocab = SynthTest;

TEST(SynthShapes, Qwen25HalfBMatchesPublishedParameterCount) {
  Result<Shape> shape = FindShape("qwen2.5-0.5b");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(ParameterCount(*shape), 494032768u);
}

TEST(SynthShapes, EveryKnownShapeMatchesItsExpectedCount) {
  for (const Shape& shape : KnownShapes()) {
    EXPECT_EQ(ParameterCount(shape), shape.expected_params) << shape.name;
    EXPECT_EQ(shape.n_embd % shape.n_head, 0) << shape.name;
    EXPECT_EQ(shape.n_head % shape.n_head_kv, 0) << shape.name;
  }
}

TEST(SynthShapes, SevenBIsUntiedAndCountsItsOutputMatrix) {
  Result<Shape> shape = FindShape("qwen2.5-7b");
  ASSERT_TRUE(shape.ok());
  EXPECT_FALSE(shape->tied_embeddings);
  EXPECT_EQ(shape->n_vocab, 152064);
  Shape tied = *shape;
  tied.tied_embeddings = true;
  EXPECT_EQ(ParameterCount(*shape) - ParameterCount(tied), 3584u * 152064u);
  EXPECT_EQ(ParameterCount(*shape), 7615616512u);
}

TEST(SynthShapes, UnknownShapeListsKnownNames) {
  Result<Shape> shape = FindShape("llama-9000b");
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.error().code, ErrorCode::kNotFound);
  EXPECT_NE(shape.error().message.find("qwen2.5-0.5b"), std::string::npos);
  EXPECT_NE(shape.error().message.find("tiny"), std::string::npos);
}

TEST_F(SynthWrite, TinyHasQwen2MetadataAndRealTokenizer) {
  const SynthReport report = SynthTiny("synth-meta.gguf", 1);
  auto g = Open(report.path, /*with_data=*/false);
  ASSERT_NE(g->gguf, nullptr);
  Result<std::string> vocab_path = FindDefaultVocab();
  ASSERT_TRUE(vocab_path.ok()) << vocab_path.error().ToString();
  auto vocab = Open(*vocab_path, false);
  ASSERT_NE(vocab->gguf, nullptr);
  const gguf_context* ctx = g->gguf;

  EXPECT_EQ(StrKv(ctx, "general.architecture"), "qwen2");
  EXPECT_EQ(StrKv(ctx, "general.name"), "synth tiny");
  EXPECT_EQ(StrKv(ctx, "hone.synth.like"), "tiny");
  EXPECT_EQ(U32Kv(ctx, "general.file_type"), 1u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.embedding_length"), 64u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.block_count"), 2u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.feed_forward_length"), 128u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.attention.head_count"), 4u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(U32Kv(ctx, "qwen2.context_length"), 32768u);
  EXPECT_FLOAT_EQ(gguf_get_val_f32(ctx, gguf_find_key(ctx, "qwen2.rope.freq_base")), 1e6f);
  EXPECT_FLOAT_EQ(gguf_get_val_f32(ctx, gguf_find_key(ctx, "qwen2.attention.layer_norm_rms_epsilon")), 1e-6f);

  EXPECT_EQ(TokenCount(ctx), TokenCount(vocab->gguf));
  EXPECT_EQ(TokenCount(ctx), 151936u);
  EXPECT_EQ(StrKv(ctx, "tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(StrKv(ctx, "tokenizer.ggml.pre"), "qwen2");
  const std::string chat_template = StrKv(ctx, "tokenizer.chat_template");
  EXPECT_NE(chat_template.find("<|im_start|>"), std::string::npos);
  // Qwen2.5-Instruct's template, with tools, and its tool-call tokens at their real ids.
  EXPECT_NE(chat_template.find("<tool_call>"), std::string::npos);
  EXPECT_NE(chat_template, StrKv(vocab->gguf, "tokenizer.chat_template"));
  const int64_t tokens = gguf_find_key(ctx, "tokenizer.ggml.tokens");
  EXPECT_STREQ(gguf_get_arr_str(ctx, tokens, 151657), "<tool_call>");
  EXPECT_STREQ(gguf_get_arr_str(ctx, tokens, 151658), "</tool_call>");
  EXPECT_STREQ(gguf_get_arr_str(ctx, tokens, 151645), "<|im_end|>");
  // Every tokenizer KV of the source survives, unchanged in size.
  for (int64_t i = 0; i < gguf_get_n_kv(vocab->gguf); ++i) {
    const std::string key = gguf_get_key(vocab->gguf, i);
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const int64_t id = gguf_find_key(ctx, key.c_str());
    ASSERT_GE(id, 0) << key;
    if (gguf_get_kv_type(ctx, id) == GGUF_TYPE_ARRAY) {
      EXPECT_EQ(gguf_get_arr_n(ctx, id), gguf_get_arr_n(vocab->gguf, i)) << key;
    }
  }
  EXPECT_EQ(fs::file_size(report.path), report.file_bytes);
  EXPECT_FALSE(fs::exists(report.path + ".part"));
}

TEST_F(SynthWrite, TinyTensorsHaveLlamaCppQwen2NamesShapesAndTypes) {
  const SynthReport report = SynthTiny("synth-tensors.gguf", 1);
  auto g = Open(report.path, false);
  ASSERT_NE(g->gguf, nullptr);

  struct Expect {
    std::string name;
    int64_t ne0, ne1;
    ggml_type type;
  };
  const int64_t e = 64, kv = 32, ff = 128, vocab = 151936;
  std::vector<Expect> expected = {{"token_embd.weight", e, vocab, GGML_TYPE_F16},
                                  {"output_norm.weight", e, 1, GGML_TYPE_F32}};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    std::vector<Expect> layer = {
        {b + "attn_norm.weight", e, 1, GGML_TYPE_F32}, {b + "attn_q.weight", e, e, GGML_TYPE_F16},
        {b + "attn_q.bias", e, 1, GGML_TYPE_F32},      {b + "attn_k.weight", e, kv, GGML_TYPE_F16},
        {b + "attn_k.bias", kv, 1, GGML_TYPE_F32},     {b + "attn_v.weight", e, kv, GGML_TYPE_F16},
        {b + "attn_v.bias", kv, 1, GGML_TYPE_F32},     {b + "attn_output.weight", e, e, GGML_TYPE_F16},
        {b + "ffn_norm.weight", e, 1, GGML_TYPE_F32},  {b + "ffn_gate.weight", e, ff, GGML_TYPE_F16},
        {b + "ffn_up.weight", e, ff, GGML_TYPE_F16},   {b + "ffn_down.weight", ff, e, GGML_TYPE_F16}};
    expected.insert(expected.end(), layer.begin(), layer.end());
  }

  ASSERT_EQ(gguf_get_n_tensors(g->gguf), static_cast<int64_t>(expected.size()));
  EXPECT_EQ(report.n_tensors, static_cast<int>(expected.size()));
  EXPECT_LT(gguf_find_tensor(g->gguf, "output.weight"), 0) << "tiny is tied";
  uint64_t params = 0;
  for (const Expect& x : expected) {
    const int64_t id = gguf_find_tensor(g->gguf, x.name.c_str());
    ASSERT_GE(id, 0) << x.name;
    const int64_t* ne = gguf_get_tensor_ne(g->gguf, id);
    EXPECT_EQ(ne[0], x.ne0) << x.name;
    EXPECT_EQ(ne[1], x.ne1) << x.name;
    EXPECT_EQ(ne[2], 1) << x.name;
    EXPECT_EQ(gguf_get_tensor_type(g->gguf, id), x.type) << x.name;
    params += x.ne0 * x.ne1;
  }
  Result<Shape> tiny = FindShape("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(params, ParameterCount(*tiny));
  EXPECT_EQ(report.n_params, params);
}

TEST_F(SynthWrite, WeightsAreSmallFiniteAndNotAllZero) {
  const SynthReport report = SynthTiny("synth-weights.gguf", 7);
  auto g = Open(report.path, /*with_data=*/true);
  ASSERT_NE(g->gguf, nullptr);
  for (int64_t id = 0; id < gguf_get_n_tensors(g->gguf); ++id) {
    const std::string name = gguf_get_tensor_name(g->gguf, id);
    const ggml_tensor* t = ggml_get_tensor(g->ggml, name.c_str());
    ASSERT_NE(t, nullptr) << name;
    const int64_t n = ggml_nelements(t);
    double sum_sq = 0;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = t->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(static_cast<ggml_fp16_t*>(t->data)[i])
                                               : static_cast<float*>(t->data)[i];
      ASSERT_TRUE(std::isfinite(v)) << name << "[" << i << "]";
      if (name.find("norm") != std::string::npos) {
        ASSERT_EQ(v, 1.0f) << name;
      } else {
        ASSERT_LT(std::fabs(v), 0.05f) << name;
      }
      sum_sq += static_cast<double>(v) * v;
      nonzero += v != 0.0f;
    }
    EXPECT_GT(nonzero, n * 9 / 10) << name;
    if (name.find("norm") == std::string::npos && n > 1000) {
      EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.002) << name;
    }
  }
}

TEST_F(SynthWrite, SameSeedSameBytesDifferentSeedDifferentBytes) {
  const std::string a = ReadFile(SynthTiny("synth-seed-a.gguf", 123).path);
  const std::string b = ReadFile(SynthTiny("synth-seed-b.gguf", 123).path);
  const std::string c = ReadFile(SynthTiny("synth-seed-c.gguf", 124).path);
  ASSERT_GT(a.size(), 19'000'000u);
  EXPECT_TRUE(a == b) << "same seed must give identical files";
  ASSERT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c) << "different seeds must give different weights";
}

TEST_F(SynthWrite, Bf16AndF32TypesAndProgress) {
  for (const auto& [type, ggml, file_type] : std::vector<std::tuple<std::string, ggml_type, uint32_t>>{
           {"bf16", GGML_TYPE_BF16, 32u}, {"f32", GGML_TYPE_F32, 0u}}) {
    SynthOptions options;
    options.like = "tiny";
    options.type = type;
    options.out_path = Scratch("synth-" + type + ".gguf");
    std::vector<double> progress;
    options.on_progress = [&](double f) { progress.push_back(f); };
    Result<SynthReport> report = Synthesize(options);
    ASSERT_TRUE(report.ok()) << report.error().ToString();
    auto g = Open(report->path, false);
    ASSERT_NE(g->gguf, nullptr);
    EXPECT_EQ(U32Kv(g->gguf, "general.file_type"), file_type);
    EXPECT_EQ(gguf_get_tensor_type(g->gguf, gguf_find_tensor(g->gguf, "blk.1.ffn_down.weight")), ggml);
    EXPECT_EQ(gguf_get_tensor_type(g->gguf, gguf_find_tensor(g->gguf, "blk.1.attn_q.bias")), GGML_TYPE_F32);
    ASSERT_FALSE(progress.empty());
    EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
    EXPECT_DOUBLE_EQ(progress.back(), 1.0);
  }
}

// A vocab with fewer tokens than embedding rows gets "[PADn]" tokens, as the
// real Qwen2.5-7B GGUFs do (152064 rows, fewer tokens); more tokens than rows is an error.
TEST_F(SynthWrite, ShortVocabIsPaddedToEmbeddingRows) {
  SynthOptions options;
  options.like = "tiny";
  options.vocab_path = WriteVocab("synth-short-vocab.gguf", 3);
  options.out_path = Scratch("synth-padded.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  auto g = Open(report->path, false);
  ASSERT_NE(g->gguf, nullptr);
  const int64_t tokens = gguf_find_key(g->gguf, "tokenizer.ggml.tokens");
  ASSERT_EQ(gguf_get_arr_n(g->gguf, tokens), 151936u);
  EXPECT_STREQ(gguf_get_arr_str(g->gguf, tokens, 2), "t2");
  EXPECT_STREQ(gguf_get_arr_str(g->gguf, tokens, 151935), "[PAD151935]");
  const int64_t types = gguf_find_key(g->gguf, "tokenizer.ggml.token_type");
  ASSERT_EQ(gguf_get_arr_n(g->gguf, types), 151936u);
  const int32_t* type_data = static_cast<const int32_t*>(gguf_get_arr_data(g->gguf, types));
  EXPECT_EQ(type_data[0], 1);
  EXPECT_EQ(type_data[151935], 4);
}

TEST_F(SynthErrors, VocabLargerThanEmbeddingIsRejected) {
  SynthOptions options;
  options.like = "tiny";
  options.vocab_path = WriteVocab("synth-long-vocab.gguf", 152000);
  options.out_path = Scratch("synth-too-many-tokens.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(options.out_path));
}

TEST_F(SynthErrors, UnknownShape) {
  SynthOptions options;
  options.like = "gpt-5";
  options.out_path = Scratch("synth-unknown.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kNotFound);
  EXPECT_NE(report.error().message.find("qwen2.5-7b"), std::string::npos);
}

TEST_F(SynthErrors, UnknownType) {
  SynthOptions options;
  options.like = "tiny";
  options.type = "q4_k";
  options.out_path = Scratch("synth-q4.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(report.error().message.find("bf16"), std::string::npos);
}

TEST_F(SynthErrors, UnwritableOutputDirectory) {
  SynthOptions options;
  options.like = "tiny";
  options.out_path = Scratch("no-such-dir/sub/model.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kIo);
  EXPECT_NE(report.error().message.find("no-such-dir"), std::string::npos);
  EXPECT_FALSE(fs::exists(options.out_path + ".part"));
}

TEST_F(SynthErrors, MissingVocabSaysWhereAndHowToFix) {
  SynthOptions options;
  options.like = "tiny";
  options.vocab_path = Scratch("no-such-vocab.gguf");
  options.out_path = Scratch("synth-novocab.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kNotFound);
  EXPECT_NE(report.error().message.find("no-such-vocab.gguf"), std::string::npos);
  EXPECT_NE(report.error().message.find("HONE_LLAMA_SOURCE_DIR"), std::string::npos);
  EXPECT_FALSE(fs::exists(options.out_path));
}

TEST_F(SynthErrors, VocabThatIsNotGgufIsCorrupt) {
  hone::testing::WriteFile(Scratch("synth-not-gguf.gguf"), "definitely not a gguf file");
  SynthOptions options;
  options.like = "tiny";
  options.vocab_path = Scratch("synth-not-gguf.gguf");
  options.out_path = Scratch("synth-badvocab.gguf");
  Result<SynthReport> report = Synthesize(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error().code, ErrorCode::kCorrupt);
}

TEST_F(SynthVocab, EnvironmentVariableWins) {
  const std::string dir = Scratch("synth-fake-llama");
  fs::create_directories(dir + "/models");
  hone::testing::WriteFile(dir + "/models/ggml-vocab-qwen2.gguf", "x");
  const char* old = std::getenv("HONE_LLAMA_SOURCE_DIR");
  const std::string saved = old ? old : "";
  setenv("HONE_LLAMA_SOURCE_DIR", dir.c_str(), 1);
  Result<std::string> found = FindDefaultVocab();
  if (old)
    setenv("HONE_LLAMA_SOURCE_DIR", saved.c_str(), 1);
  else
    unsetenv("HONE_LLAMA_SOURCE_DIR");
  ASSERT_TRUE(found.ok()) << found.error().ToString();
  EXPECT_EQ(found.value(), dir + "/models/ggml-vocab-qwen2.gguf");
}

}  // namespace
}  // namespace hone::synth
