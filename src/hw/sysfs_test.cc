#include "hw/sysfs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "testing/test_env.h"

namespace hone::hw {
namespace {

std::string Fixture(const std::string& name) {
  return testing::SourceDir() + "/tests/fixtures/sysfs/" + name;
}

std::vector<int> Cpus(std::string_view text) {
  Result<std::vector<int>> r = ParseCpuList(text);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return r.ok() ? *r : std::vector<int>{-1};
}

TEST(CpuListTest, ParsesRangesAndSingles) {
  EXPECT_EQ(Cpus("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(Cpus("5"), (std::vector<int>{5}));
  EXPECT_EQ(Cpus("0-0"), (std::vector<int>{0}));
  EXPECT_EQ(Cpus("0-1\n"), (std::vector<int>{0, 1}));  // sysfs files end in a newline
  EXPECT_EQ(Cpus(" 2 , 4-5 "), (std::vector<int>{2, 4, 5}));
}

TEST(CpuListTest, SortsAndDeduplicates) { EXPECT_EQ(Cpus("8,0-2,1,2"), (std::vector<int>{0, 1, 2, 8})); }

TEST(CpuListTest, EmptyIsEmpty) {
  EXPECT_TRUE(Cpus("").empty());
  EXPECT_TRUE(Cpus("\n").empty());
}

TEST(CpuListTest, RejectsGarbage) {
  for (const char* bad : {"3-1", "a", "1-", "-1", "1,,2", "0-3,x", "1-2-3", "0-99999999", "1.5"}) {
    Result<std::vector<int>> r = ParseCpuList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kCorrupt) << bad;
  }
}

TEST(RootedPathTest, JoinsWithoutDoubleSlash) {
  EXPECT_EQ(RootedPath("/", "/proc/meminfo"), "/proc/meminfo");
  EXPECT_EQ(RootedPath("", "/proc/meminfo"), "/proc/meminfo");
  EXPECT_EQ(RootedPath("/tmp/fx/", "/proc/meminfo"), "/tmp/fx/proc/meminfo");
}

TEST(CpuInfoTest, X86FlagsMapToIsaNames) {
  Result<CpuInfo> info = ReadCpuInfo(Fixture("x86_2s_numa"));
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  EXPECT_EQ(info->model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(info->arch, "x86_64");
  EXPECT_EQ(info->isa, (std::vector<std::string>{"SSE4_2", "AVX", "AVX2", "FMA", "F16C", "AVX512F",
                                                 "AVX512BW", "AVX512VL", "AVX512_VNNI", "AVX512_BF16",
                                                 "AVX_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16"}));
  ASSERT_EQ(info->processors.size(), 16u);
  EXPECT_EQ(info->processors[13].id, 13);
  EXPECT_EQ(info->processors[13].package, 1);
  EXPECT_EQ(info->processors[13].core, 1);
}

TEST(CpuInfoTest, FlagsMatchWholeWordsOnly) {
  // "avx512f" must not imply "avx", nor "sse4_2" come from "sse4_1".
  Result<CpuInfo> info = ParseCpuInfo("processor : 0\nflags : sse4_1 avx512fx avx2x\n");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->isa.empty());
}

TEST(CpuInfoTest, Aarch64FeaturesAndModel) {
  Result<CpuInfo> info = ReadCpuInfo(Fixture("arm64_v1"));
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  EXPECT_EQ(info->arch, "aarch64");
  EXPECT_EQ(info->model, "ARM Neoverse-V1");
  // Neoverse-V1 has SVE but not SVE2.
  EXPECT_EQ(info->isa, (std::vector<std::string>{"NEON", "SVE", "DOTPROD", "I8MM", "FP16", "BF16"}));
  EXPECT_EQ(info->processors.size(), 4u);
  EXPECT_EQ(info->processors[2].core, -1);
}

TEST(CpuInfoTest, UnknownImplementerStillNamed) {
  Result<CpuInfo> info =
      ParseCpuInfo("processor : 0\nFeatures : fp asimd sve2\nCPU implementer : 0xc0\nCPU part : 0xac3\n");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->model, "Ampere part 0xac3");
  EXPECT_EQ(info->isa, (std::vector<std::string>{"NEON", "SVE2"}));
}

TEST(CpuInfoTest, NoProcessorIsCorrupt) {
  Result<CpuInfo> info = ParseCpuInfo("garbage\n");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, ErrorCode::kCorrupt);
}

TEST(MemInfoTest, TotalAndAvailable) {
  Result<MemInfo> mem = ReadMemInfo(Fixture("x86_2s_numa"));
  ASSERT_TRUE(mem.ok()) << mem.error().ToString();
  EXPECT_EQ(mem->total_bytes, 131072000ull * 1024);
  EXPECT_EQ(mem->available_bytes, 120000000ull * 1024);
}

TEST(MemInfoTest, OldKernelWithoutMemAvailable) {
  Result<MemInfo> mem = ReadMemInfo(Fixture("x86_small_v1"));
  ASSERT_TRUE(mem.ok()) << mem.error().ToString();
  EXPECT_EQ(mem->total_bytes, 8048576ull * 1024);
  EXPECT_EQ(mem->available_bytes, (4000000ull + 200000 + 1800000) * 1024);  // free + buffers + cached
}

TEST(MemInfoTest, MissingFileIsNotFound) {
  Result<MemInfo> mem = ReadMemInfo(Fixture("cgroup_v1_limited"));  // that tree has no /proc
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.error().code, ErrorCode::kNotFound);
  EXPECT_NE(mem.error().message.find("/proc/meminfo"), std::string::npos) << mem.error().message;
}

TEST(MemInfoTest, NoTotalIsCorrupt) {
  Result<MemInfo> mem = ParseMemInfo("MemFree: 10 kB\n");
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.error().code, ErrorCode::kCorrupt);
}

TEST(CgroupTest, V2NestedLimits) {
  Result<CgroupLimits> cg = ReadCgroupLimits(Fixture("x86_2s_numa"));
  ASSERT_TRUE(cg.ok()) << cg.error().ToString();
  EXPECT_DOUBLE_EQ(cg->cpu_quota, 4.0);
  // The leaf's 8 GiB is below its parent's 16 GiB.
  EXPECT_EQ(cg->memory_limit_bytes, 8ull << 30);
  EXPECT_EQ(cg->memory_usage_bytes, 1ull << 30);
  EXPECT_EQ(cg->allowed_cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(CgroupTest, V2MaxMeansUnlimited) {
  Result<CgroupLimits> cg = ReadCgroupLimits(Fixture("arm64_v1"));
  ASSERT_TRUE(cg.ok()) << cg.error().ToString();
  EXPECT_EQ(cg->cpu_quota, 0);
  EXPECT_EQ(cg->memory_limit_bytes, 0u);
  EXPECT_EQ(cg->memory_usage_bytes, 2097152u);
  EXPECT_EQ(cg->allowed_cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST(CgroupTest, V1Unlimited) {
  Result<CgroupLimits> cg = ReadCgroupLimits(Fixture("x86_small_v1"));
  ASSERT_TRUE(cg.ok()) << cg.error().ToString();
  EXPECT_EQ(cg->cpu_quota, 0);            // cfs_quota_us = -1
  EXPECT_EQ(cg->memory_limit_bytes, 0u);  // LONG_MAX page-rounded
  EXPECT_EQ(cg->memory_usage_bytes, 524288000u);
  EXPECT_EQ(cg->allowed_cpus, (std::vector<int>{0, 1, 2, 3}));
}

TEST(CgroupTest, V1Limits) {
  Result<CgroupLimits> cg = ReadCgroupLimits(Fixture("cgroup_v1_limited"));
  ASSERT_TRUE(cg.ok()) << cg.error().ToString();
  EXPECT_DOUBLE_EQ(cg->cpu_quota, 1.5);
  EXPECT_EQ(cg->memory_limit_bytes, 2ull << 30);
  EXPECT_EQ(cg->memory_usage_bytes, 1ull << 30);
  EXPECT_EQ(cg->allowed_cpus, (std::vector<int>{1, 3}));  // effective_cpus wins over cpus
}

TEST(CgroupTest, NoCgroupFilesMeansNoLimits) {
  Result<CgroupLimits> cg = ReadCgroupLimits(Fixture("does_not_exist"));
  ASSERT_TRUE(cg.ok()) << cg.error().ToString();
  EXPECT_EQ(cg->cpu_quota, 0);
  EXPECT_EQ(cg->memory_limit_bytes, 0u);
  EXPECT_TRUE(cg->allowed_cpus.empty());
}

TEST(CgroupTest, MalformedCpuMaxIsCorrupt) {
  std::string root = testing::TempPath("hw_bad_cgroup");
  std::filesystem::create_directories(root + "/sys/fs/cgroup");
  testing::WriteFile(root + "/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  testing::WriteFile(root + "/sys/fs/cgroup/cpu.max", "lots 100000\n");
  Result<CgroupLimits> cg = ReadCgroupLimits(root);
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.error().code, ErrorCode::kCorrupt);
  EXPECT_NE(cg.error().message.find("cpu.max"), std::string::npos) << cg.error().message;
}

}  // namespace
}  // namespace hone::hw
