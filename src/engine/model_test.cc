// Loading real models and every kind of bad file.
#include "engine/model.h"

#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/gguf_file.h"
#include "engine/session.h"
#include "testing/test_env.h"

namespace hone::engine {
namespace {

using hone::testing::ReadFile;
using hone::testing::SharedModel;
using hone::testing::TempPath;
using hone::testing::WriteFile;

const std::string kStories = SharedModel("stories260K.gguf");

TEST(Gguf, ReadsStoriesMetadata) {
  auto g = ReadGguf(kStories);
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  EXPECT_EQ(g->architecture, "llama");
  EXPECT_EQ(g->n_params(), 292800u);  // the README's figure
  EXPECT_EQ(g->ArchInt("embedding_length").value_or(0), 64);
  EXPECT_EQ(g->ArchInt("block_count").value_or(0), 5);
  EXPECT_EQ(g->type_histogram.count("f32"), 1u);
  EXPECT_NEAR(g->bits_per_weight(), 32.0, 0.01);
}

TEST(BadFile, Missing) {
  auto m = Model::Load("/nonexistent/model.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kNotFound);
  EXPECT_NE(m.error().message.find("not found"), std::string::npos);
}

TEST(BadFile, NotAGguf) {
  std::string p = TempPath("not-a-model.gguf");
  WriteFile(p, "this is a text file, not a model\n");
  auto m = Model::Load(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kCorrupt);
  EXPECT_NE(m.error().message.find("not a GGUF"), std::string::npos) << m.error().message;
}

TEST(BadFile, EmptyFile) {
  std::string p = TempPath("empty.gguf");
  WriteFile(p, "");
  auto m = Model::Load(p);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("not a GGUF"), std::string::npos);
}

TEST(BadFile, Truncated) {
  std::string data = ReadFile(kStories);
  std::string p = TempPath("truncated.gguf");
  WriteFile(p, data.substr(0, data.size() / 2));
  auto m = Model::Load(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kCorrupt);
  EXPECT_NE(m.error().message.find("truncated"), std::string::npos) << m.error().message;
}

TEST(BadFile, DamagedHeader) {
  std::string data = ReadFile(kStories);
  // Keep the magic, wreck the version and counts that follow it.
  for (size_t i = 4; i < 64; ++i) data[i] = static_cast<char>(0xFF);
  std::string p = TempPath("damaged.gguf");
  WriteFile(p, data);
  auto m = Model::Load(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kCorrupt);
  EXPECT_NE(m.error().message.find("damaged"), std::string::npos) << m.error().message;
}

TEST(BadFile, Directory) {
  auto m = Model::Load(hone::testing::TempDir());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
}

TEST(BadFile, UnknownArchitecture) {
  // Rewrite stories260K with another architecture name, weights intact:
  // new metadata, then the original tensor data section byte for byte.
  ggml_context* meta = nullptr;
  gguf_context* ctx = gguf_init_from_file(kStories.c_str(), {/*no_alloc=*/true, &meta});
  ASSERT_NE(ctx, nullptr);
  const size_t data_offset = gguf_get_data_offset(ctx);
  gguf_set_val_str(ctx, "general.architecture", "nosucharch");
  std::string header(gguf_get_meta_size(ctx), '\0');
  gguf_get_meta_data(ctx, header.data());
  gguf_free(ctx);
  ggml_free(meta);
  std::string p = TempPath("unknown-arch.gguf");
  WriteFile(p, header + ReadFile(kStories).substr(data_offset));
  auto m = Model::Load(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kUnsupported) << m.error().ToString();
  EXPECT_NE(m.error().message.find("nosucharch"), std::string::npos) << m.error().message;
}

TEST(Model, LoadsStoriesWithProgressAndInfo) {
  std::vector<float> seen;
  LoadOptions o;
  o.on_progress = [&](float f) {
    seen.push_back(f);
    return true;
  };
  auto m = Model::Load(kStories, o);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  const ModelInfo& info = (*m)->info();
  EXPECT_EQ(info.architecture, "llama");
  EXPECT_EQ(info.n_params, 292800u);
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.n_layer, 5);
  EXPECT_EQ(info.n_head, 8);
  EXPECT_EQ(info.n_head_kv, 4);
  EXPECT_EQ(info.n_ctx_train, 2048);  // what the GGUF declares (it was trained on 512)
  EXPECT_FALSE(info.synthetic);
  ASSERT_FALSE(seen.empty());
  EXPECT_FLOAT_EQ(seen.back(), 1.0f);
}

TEST(Model, CancelledLoadIsAborted) {
  LoadOptions o;
  o.on_progress = [](float) { return false; };
  auto m = Model::Load(kStories, o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kAborted);
}

TEST(Model, EveryLoadModeWorks) {
  for (auto mode : {LoadMode::kMmap, LoadMode::kNoMmap}) {
    LoadOptions o;
    o.mode = mode;
    o.repack = false;
    auto m = Model::Load(kStories, o);
    EXPECT_TRUE(m.ok()) << LoadModeName(mode);
  }
  EXPECT_FALSE(ParseLoadMode("sideways").ok());
}

TEST(Session, ContextTooLargeForBudgetIsRefused) {
  auto m = Model::Load(kStories);
  ASSERT_TRUE(m.ok());
  SessionOptions o;
  o.n_ctx = 1u << 24;
  o.memory_budget_bytes = 64ull << 20;
  auto s = Session::Create(*m, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(s.error().message.find("smaller context"), std::string::npos) << s.error().message;
}

TEST(Session, ContextLargerThanMachineFailsCleanly) {
  // ~640 GB of KV cache: llama.cpp's allocation fails; we must return an error, not abort.
  auto m = Model::Load(kStories);
  ASSERT_TRUE(m.ok());
  SessionOptions o;
  o.n_ctx = 1u << 30;
  auto s = Session::Create(*m, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kOutOfMemory) << s.error().ToString();
}

TEST(Session, BadOptionsAreRejected) {
  auto m = Model::Load(kStories);
  ASSERT_TRUE(m.ok());
  SessionOptions o;
  o.kv_type_k = "q9_9";
  EXPECT_EQ(Session::Create(*m, o).error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ParseFlashAttn("maybe").ok());
}

}  // namespace
}  // namespace hone::engine
