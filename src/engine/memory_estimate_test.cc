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

}  // namespace hone::engine
