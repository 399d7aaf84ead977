#include "tune/flags.h"

#include <gtest/gtest.h>

namespace hone::tune {
namespace {

TEST(Flags, CpuMaskIsHexWithCpuZeroInTheLowestBit) {
  EXPECT_EQ(CpuMaskHex({0}), "0x1");
  EXPECT_EQ(CpuMaskHex({0, 1, 2, 3}), "0xf");
  EXPECT_EQ(CpuMaskHex({4}), "0x10");
  EXPECT_EQ(CpuMaskHex({0, 2, 9}), "0x205");
  EXPECT_EQ(CpuMaskHex({}), "");
}

TEST(Flags, DefaultsGiveOnlyThreadsAndHonesFlashAttention) {
  // hone's flash attention auto is off with an f16 V cache; llama.cpp's is on.
  EXPECT_EQ(LlamaFlags(DefaultConfig(8), LlamaTool::kCli), "-t 8 -tb 8 -fa off");
  Config q = DefaultConfig(8);
  q.kv_type = "q8_0";
  EXPECT_EQ(LlamaFlags(q, LlamaTool::kCli), "-t 8 -tb 8 -ctk q8_0 -ctv q8_0");
}

TEST(Flags, EveryTunedParameterHasItsFlag) {
  Config c = DefaultConfig(8, 4);
  c.threads = 4;
  c.threads_batch = 8;
  c.cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  c.strict_cpu = true;
  c.poll = 0;
  c.n_ubatch = 256;
  c.flash_attn = engine::FlashAttn::kOn;
  c.kv_type = "q8_0";
  c.load_mode = engine::LoadMode::kNoMmap;
  c.repack = false;
  EXPECT_EQ(LlamaFlags(c, LlamaTool::kServer, 4096),
            "-t 4 -tb 8 -C 0xf -Cb 0xff --cpu-strict 1 --cpu-strict-batch 1 --poll 0 -c 4096 -ub 256 -fa on "
            "-ctk q8_0 -ctv q8_0 --no-mmap -nr -np 4");
  // Prefill's own set goes to -Cb.
  Config split = c;
  split.cpus = {0, 1, 2, 3};
  split.cpus_batch = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_NE(LlamaFlags(split, LlamaTool::kServer).find("-C 0xf -Cb 0x1ff "), std::string::npos);
  // llama-cli has no parallel slots.
  EXPECT_EQ(LlamaFlags(c, LlamaTool::kCli).find("-np"), std::string::npos);
}

TEST(Flags, NumaPlacementsNameLlamaCppsStrategy) {
  Config c = DefaultConfig(8);
  c.placement = "interleave";
  c.cpus = {0, 4, 1, 5};
  EXPECT_NE(LlamaFlags(c, LlamaTool::kCli).find("--numa distribute"), std::string::npos);
  c.placement = "node1";
  EXPECT_NE(LlamaFlags(c, LlamaTool::kCli).find("--numa isolate"), std::string::npos);
  c.placement = "physical";
  EXPECT_EQ(LlamaFlags(c, LlamaTool::kCli).find("--numa"), std::string::npos);
}

}  // namespace
}  // namespace hone::tune
