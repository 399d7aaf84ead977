#include "engine/memory_estimate.h"

#include <gtest/gtest.h>

#include "testing/test_env.h"

namespace hone::engine {

TEST(MemoryEstimate, KvCacheIsExactForStories) {
  auto g = ReadGguf(hone::testing::SharedModel("stories260K.gguf"));
  ASSERT_TRUE(g.ok());
  MemoryRequest r;
  r.n_ctx = 512;
  auto e = EstimateMemory(*g, r);
  ASSERT_TRUE(e.ok());
  // 5 layers x 512 cells x 4 KV heads x (8 + 8) dims x 2 bytes (f16)
  EXPECT_EQ(e->kv_cache, 5ull * 512 * 4 * 16 * 2);
  EXPECT_EQ(e->weights, g->tensor_bytes());
  EXPECT_GT(e->compute, 0u);
  EXPECT_EQ(e->total(), e->weights + e->kv_cache + e->compute + e->output);
}

TEST(MemoryEstimate, ScalesWithContextAndKvType) {
  auto g = ReadGguf(hone::testing::SharedModel("stories260K.gguf"));
  ASSERT_TRUE(g.ok());
  MemoryRequest a, b, c;
  a.n_ctx = 1024;
  b.n_ctx = 2048;
  c.n_ctx = 2048;
  c.kv_type = "q8_0";
  auto ea = EstimateMemory(*g, a), eb = EstimateMemory(*g, b), ec = EstimateMemory(*g, c);
  ASSERT_TRUE(ea.ok() && eb.ok() && ec.ok());
  EXPECT_EQ(eb->kv_cache, 2 * ea->kv_cache);
  EXPECT_NEAR(static_cast<double>(ec->kv_cache) / eb->kv_cache, 34.0 / 64, 1e-3);
  c.kv_type = "q9";
  EXPECT_FALSE(EstimateMemory(*g, c).ok());
}

TEST(MemoryEstimate, FlashAttentionShrinksComputeAtLongContext) {
  auto g = ReadGguf(hone::testing::SharedModel("tinystories-d256-l4-f32.gguf"));
  ASSERT_TRUE(g.ok());
  MemoryRequest r;
  r.n_ctx = 8192;
  auto off = EstimateMemory(*g, r);
  r.flash_attn = true;
  auto on = EstimateMemory(*g, r);
  ASSERT_TRUE(off.ok() && on.ok());
  EXPECT_LT(on->compute, off->compute);
}

TEST(MemoryEstimate, NamesTheMostPreciseQuantizationThatFits) {
  auto g = ReadGguf(hone::testing::SharedModel("tinystories-d256-l4-f32.gguf"));
  ASSERT_TRUE(g.ok());
  MemoryRequest r;
  r.n_ctx = 256;
  auto e = EstimateMemory(*g, r);
  ASSERT_TRUE(e.ok());
  // One byte short of the F32 file: Q8_0 (a quarter of its weights) fits.
  QuantFit q8 = LargestQuantThatFits(*g, *e, e->total() - 1);
  EXPECT_EQ(q8.type, "Q8_0");
  EXPECT_EQ(q8.non_weights, e->total() - e->weights);
  EXPECT_LT(q8.total, e->total());
  EXPECT_GT(q8.total, q8.non_weights + e->weights / 5);  // 8.5 of 32 bits per weight, not less
  // Just below what Q8_0 needs: the next smaller type, Q6_K.
  EXPECT_EQ(LargestQuantThatFits(*g, *e, q8.total - 1).type, "Q6_K");
  // Nothing fits in less than the KV cache and buffers alone.
  QuantFit none = LargestQuantThatFits(*g, *e, q8.non_weights);
  EXPECT_TRUE(none.type.empty());
  EXPECT_GT(none.total, q8.non_weights);  // Q2_K's size, for the message
  EXPECT_LT(none.total, q8.total);
}

}  // namespace hone::engine
