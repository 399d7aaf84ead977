#include "hw/probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hw/bandwidth.h"
#include "hw/core_kinds.h"
#include "testing/test_env.h"

namespace hone::hw {
namespace {

std::string Fixture(const std::string& name) {
  return testing::SourceDir() + "/tests/fixtures/sysfs/" + name;
}

MachineInfo ProbeFixture(const std::string& name) {
  ProbeOptions options;
  options.fs_root = Fixture(name);
  options.measure_bandwidth = false;
  Result<MachineInfo> info = Probe(options);
  EXPECT_TRUE(info.ok()) << info.error().ToString();
  return info.ok() ? *info : MachineInfo{};
}

void ExpectCache(const CacheLevel& c, int level, const std::string& type, uint64_t size, int instances,
                 int shared) {
  EXPECT_EQ(c.level, level);
  EXPECT_EQ(c.type, type);
  EXPECT_EQ(c.size_bytes, size) << "L" << level << " " << type;
  EXPECT_EQ(c.instances, instances) << "L" << level << " " << type;
  EXPECT_EQ(c.shared_by_cpus, shared) << "L" << level << " " << type;
}

TEST(ProbeFixtureTest, TwoSocketNumaX86) {
  MachineInfo m = ProbeFixture("x86_2s_numa");
  EXPECT_EQ(m.cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(m.arch, "x86_64");
  EXPECT_EQ(m.packages, 2);
  EXPECT_EQ(m.physical_cores, 8);
  EXPECT_EQ(m.logical_cpus, 16);
  EXPECT_EQ(m.smt_per_core, 2);
  ASSERT_EQ(m.cores.size(), 8u);
  // Linux numbers the second threads after all first threads: core 0 is {0, 8}.
  const std::vector<std::vector<int>> want_cpus = {{0, 8},  {1, 9},  {2, 10}, {3, 11},
                                                   {4, 12}, {5, 13}, {6, 14}, {7, 15}};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(m.cores[i].id, i);
    EXPECT_EQ(m.cores[i].cpus, want_cpus[i]) << "core " << i;
    EXPECT_EQ(m.cores[i].package, i / 4) << "core " << i;
    EXPECT_EQ(m.cores[i].numa_node, i / 4) << "core " << i;
  }
  ASSERT_EQ(m.numa_nodes.size(), 2u);
  EXPECT_EQ(m.numa_nodes[0].id, 0);
  EXPECT_EQ(m.numa_nodes[0].cpus, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(m.numa_nodes[0].memory_bytes, 65536000ull * 1024);
  EXPECT_EQ(m.numa_nodes[1].cpus, (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  ASSERT_EQ(m.caches.size(), 4u);
  ExpectCache(m.caches[0], 1, "Data", 48 << 10, 8, 2);
  ExpectCache(m.caches[1], 1, "Instruction", 32 << 10, 8, 2);
  ExpectCache(m.caches[2], 2, "Unified", 2 << 20, 8, 2);
  ExpectCache(m.caches[3], 3, "Unified", 105 << 20, 2, 8);
  EXPECT_TRUE(m.has_isa("AMX_INT8"));
  EXPECT_TRUE(m.has_isa("avx512_vnni"));  // case-insensitive
  EXPECT_FALSE(m.has_isa("SVE"));
  EXPECT_EQ(m.mem_total_bytes, 131072000ull * 1024);
  EXPECT_DOUBLE_EQ(m.cgroup.cpu_quota, 4.0);
  EXPECT_EQ(m.cgroup.memory_limit_bytes, 8ull << 30);
  // min(16 logical, 8 in the cpuset, quota 4).
  EXPECT_EQ(m.usable_cpus(), 4);
  // min(available ~114 GiB, 8 GiB limit - 1 GiB used).
  EXPECT_EQ(m.usable_memory_bytes(), 7ull << 30);
}

TEST(ProbeFixtureTest, SmallX86FromCpuInfoOnly) {
  MachineInfo m = ProbeFixture("x86_small_v1");
  EXPECT_EQ(m.packages, 1);
  EXPECT_EQ(m.physical_cores, 2);
  EXPECT_EQ(m.logical_cpus, 4);
  EXPECT_EQ(m.smt_per_core, 2);
  ASSERT_EQ(m.cores.size(), 2u);
  EXPECT_EQ(m.cores[0].cpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(m.cores[1].cpus, (std::vector<int>{1, 3}));
  // No NUMA information: one node holding everything.
  ASSERT_EQ(m.numa_nodes.size(), 1u);
  EXPECT_EQ(m.numa_nodes[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(m.numa_nodes[0].memory_bytes, m.mem_total_bytes);
  EXPECT_TRUE(m.caches.empty());
  EXPECT_EQ(m.isa, (std::vector<std::string>{"SSE4_2", "AVX", "AVX2", "FMA", "F16C"}));
  EXPECT_EQ(m.cgroup.cpu_quota, 0);
  EXPECT_EQ(m.cgroup.memory_limit_bytes, 0u);
  EXPECT_EQ(m.usable_cpus(), 4);
  EXPECT_EQ(m.usable_memory_bytes(), m.mem_available_bytes);
}

TEST(ProbeFixtureTest, Aarch64) {
  MachineInfo m = ProbeFixture("arm64_v1");
  EXPECT_EQ(m.arch, "aarch64");
  EXPECT_EQ(m.cpu_model, "ARM Neoverse-V1");
  EXPECT_EQ(m.physical_cores, 4);
  EXPECT_EQ(m.logical_cpus, 4);
  EXPECT_EQ(m.smt_per_core, 1);
  ASSERT_EQ(m.caches.size(), 4u);
  ExpectCache(m.caches[0], 1, "Data", 64 << 10, 4, 1);
  ExpectCache(m.caches[1], 1, "Instruction", 64 << 10, 4, 1);
  ExpectCache(m.caches[2], 2, "Unified", 1 << 20, 4, 1);
  ExpectCache(m.caches[3], 3, "Unified", 32 << 20, 1, 4);
  EXPECT_TRUE(m.has_isa("SVE"));
  EXPECT_FALSE(m.has_isa("SVE2"));
  EXPECT_FALSE(m.has_isa("AVX2"));
  EXPECT_EQ(m.usable_cpus(), 4);
  EXPECT_EQ(m.usable_memory_bytes(), 15500000ull * 1024);
}

TEST(ProbeFixtureTest, HybridIntelLaptopHasPerformanceAndEfficiencyCores) {
  MachineInfo m = ProbeFixture("intel_hybrid_laptop");
  EXPECT_EQ(m.cpu_model, "12th Gen Intel(R) Core(TM) i7-1260P");
  EXPECT_EQ(m.physical_cores, 12);  // 4 performance cores with SMT, 8 efficiency cores without
  EXPECT_EQ(m.logical_cpus, 16);
  ASSERT_EQ(m.core_kinds.size(), 2u);
  EXPECT_EQ(m.core_kinds_source, "intel hybrid (sysfs)");
  EXPECT_EQ(m.core_kinds[0].name, "performance");
  EXPECT_EQ(m.core_kinds[0].cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.core_kinds[1].name, "efficiency");
  EXPECT_EQ(m.core_kinds[1].cpus, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(ProbeFixtureTest, ArmBigLittleBoardByCpuCapacity) {
  MachineInfo m = ProbeFixture("arm_biglittle");
  EXPECT_EQ(m.arch, "aarch64");
  EXPECT_EQ(m.cpu_model, "ARM Cortex-A55 + Cortex-A76");  // from the implementer and both part numbers
  EXPECT_EQ(m.physical_cores, 8);
  EXPECT_TRUE(m.has_isa("NEON"));
  ASSERT_EQ(m.core_kinds.size(), 2u);
  EXPECT_EQ(m.core_kinds_source, "cpu_capacity");
  EXPECT_EQ(m.core_kinds[0].name, "big");
  EXPECT_EQ(m.core_kinds[0].capacity, 1024);
  EXPECT_EQ(m.core_kinds[0].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(m.core_kinds[1].name, "little");
  EXPECT_EQ(m.core_kinds[1].capacity, 414);
  EXPECT_EQ(m.core_kinds[1].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_LT(m.usable_memory_bytes(), 4ull << 30);  // a 4 GB board
}

TEST(CoreKindsTest, CapacitiesWithinTenPercentAreOneKind) {
  std::vector<CoreKind> kinds = {{"", {0, 1}, 1024}, {"", {2, 3}, 1007}, {"", {4, 5}, 414}};
  MergeCloseKinds(&kinds);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(kinds[1].cpus, (std::vector<int>{4, 5}));
  // Kinds without a capacity (an efficiency rank only) stay apart.
  std::vector<CoreKind> ranked = {{"IntelCore", {0}, 0}, {"IntelAtom", {1}, 0}};
  MergeCloseKinds(&ranked);
  EXPECT_EQ(ranked.size(), 2u);
  NameByRank(&ranked);
  EXPECT_EQ(ranked[0].name, "performance");
  EXPECT_EQ(ranked[1].name, "efficiency");
}

TEST(ProbeFixtureTest, OneKindOfCoreListsNoKinds) {
  for (const char* name : {"x86_2s_numa", "x86_small_v1", "arm64_v1"}) {
    MachineInfo m = ProbeFixture(name);
    EXPECT_TRUE(m.core_kinds.empty()) << name;
  }
}

TEST(ProbeFixtureTest, NoBandwidthForFixtureRoots) {
  ProbeOptions options;
  options.fs_root = Fixture("arm64_v1");
  options.measure_bandwidth = true;  // would measure this machine, not the fixture's
  Result<MachineInfo> info = Probe(options);
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  EXPECT_EQ(info->bandwidth.read_gbps, 0);
  EXPECT_EQ(info->bandwidth.runs, 0);
}

TEST(ProbeFixtureTest, MissingCpuInfoIsAnError) {
  ProbeOptions options;
  options.fs_root = Fixture("cgroup_v1_limited");  // only cgroup files
  Result<MachineInfo> info = Probe(options);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_NE(info.error().message.find("/proc/cpuinfo"), std::string::npos) << info.error().message;
}

TEST(ProbeFixtureTest, MissingMemInfoIsAnError) {
  std::string root = testing::TempPath("hw_no_meminfo");
  std::filesystem::create_directories(root + "/proc");
  testing::WriteFile(root + "/proc/cpuinfo", testing::ReadFile(Fixture("arm64_v1") + "/proc/cpuinfo"));
  std::filesystem::remove(root + "/proc/meminfo");
  ProbeOptions options;
  options.fs_root = root;
  Result<MachineInfo> info = Probe(options);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_NE(info.error().message.find("/proc/meminfo"), std::string::npos) << info.error().message;
}

TEST(UsableTest, LimitBelowUsageLeavesNothing) {
  MachineInfo m;
  m.mem_available_bytes = 10ull << 30;
  m.cgroup.memory_limit_bytes = 1ull << 30;
  m.cgroup.memory_usage_bytes = 2ull << 30;
  EXPECT_EQ(m.usable_memory_bytes(), 0u);
}

TEST(UsableTest, FractionalQuotaRoundsUp) {
  MachineInfo m;
  m.logical_cpus = 8;
  m.cgroup.cpu_quota = 1.5;
  EXPECT_EQ(m.usable_cpus(), 2);
  m.cgroup.cpu_quota = 0.2;
  EXPECT_EQ(m.usable_cpus(), 1);
}

TEST(UsableTest, TightestCpuLimitWins) {
  MachineInfo m;
  m.logical_cpus = 16;
  m.cgroup.cpu_quota = 4;
  m.cgroup.allowed_cpus = {2, 3};
  EXPECT_EQ(m.usable_cpus(), 2);  // the cpuset
  m.cgroup.allowed_cpus.clear();
  EXPECT_EQ(m.usable_cpus(), 4);  // the quota
  m.cgroup.cpu_quota = 0;
  EXPECT_EQ(m.usable_cpus(), 16);
}

TEST(FingerprintTest, DependsOnHardwareOnly) {
  MachineInfo a = ProbeFixture("x86_2s_numa");
  std::string fp = Fingerprint(a);
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef"), std::string::npos) << fp;
  EXPECT_NE(fp, Fingerprint(ProbeFixture("x86_small_v1")));
  EXPECT_NE(fp, Fingerprint(ProbeFixture("arm64_v1")));

  MachineInfo b = a;  // what changes from run to run must not matter
  b.mem_available_bytes /= 2;
  b.mem_total_bytes -= 50ull << 20;
  b.cgroup = {};
  b.bandwidth.read_gbps = 123;
  EXPECT_EQ(Fingerprint(b), fp);

  MachineInfo c = a;
  c.isa.pop_back();
  EXPECT_NE(Fingerprint(c), fp);
  c = a;
  c.caches[3].size_bytes *= 2;
  EXPECT_NE(Fingerprint(c), fp);
}

TEST(BandwidthTest, MeasuresAndReports) {
  BandwidthOptions options;
  options.threads = 2;
  options.buffer_bytes = 64ull << 20;
  options.seconds = 0.1;
  Result<Bandwidth> bw = MeasureReadBandwidth(options);
  ASSERT_TRUE(bw.ok()) << bw.error().ToString();
  EXPECT_EQ(bw->threads, 2);
  EXPECT_EQ(bw->buffer_bytes, 64ull << 20);
  EXPECT_GE(bw->runs, 3);
  EXPECT_GT(bw->read_gbps, 0.1);
  EXPECT_GE(bw->read_gbps, bw->read_gbps_mean);
}

TEST(BandwidthTest, RejectsBadArguments) {
  BandwidthOptions options;
  options.threads = 0;
  EXPECT_EQ(MeasureReadBandwidth(options).error().code, ErrorCode::kInvalidArgument);
  options.threads = 4;
  options.buffer_bytes = 1000;
  EXPECT_EQ(MeasureReadBandwidth(options).error().code, ErrorCode::kInvalidArgument);
}

TEST(ProbeLiveTest, ThisMachine) {
  ProbeOptions options;
  options.measure_bandwidth = true;
  options.bandwidth_seconds = 0.3;
  Result<MachineInfo> first = Probe(options);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  const MachineInfo& m = *first;
  EXPECT_GE(m.physical_cores, 1);
  EXPECT_GE(m.logical_cpus, m.physical_cores);
  EXPECT_EQ(m.logical_cpus, sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_GE(m.packages, 1);
  EXPECT_GE(m.numa_nodes.size(), 1u);
  EXPECT_GT(m.mem_total_bytes, 0u);
  EXPECT_GT(m.usable_memory_bytes(), 0u);
  EXPECT_GE(m.usable_cpus(), 1);
  EXPECT_FALSE(m.cgroup.allowed_cpus.empty());
  EXPECT_GT(m.bandwidth.read_gbps, 0.1);
  EXPECT_GE(m.bandwidth.runs, 3);
  EXPECT_GE(m.bandwidth.threads, 1);

  options.measure_bandwidth = false;
  Result<MachineInfo> second = Probe(options);
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  EXPECT_EQ(Fingerprint(m), Fingerprint(*second));
}

TEST(ProbeLiveTest, SysfsReaderAgreesWithHwloc) {
  // "/." names the live tree but is not "/", so Probe takes the sysfs reader.
  ProbeOptions options;
  options.measure_bandwidth = false;
  Result<MachineInfo> hw = Probe(options);
  options.fs_root = "/.";
  Result<MachineInfo> fs = Probe(options);
  ASSERT_TRUE(hw.ok()) << hw.error().ToString();
  ASSERT_TRUE(fs.ok()) << fs.error().ToString();
  EXPECT_EQ(hw->packages, fs->packages);
  EXPECT_EQ(hw->physical_cores, fs->physical_cores);
  EXPECT_EQ(hw->logical_cpus, fs->logical_cpus);
  EXPECT_EQ(hw->smt_per_core, fs->smt_per_core);
  ASSERT_EQ(hw->cores.size(), fs->cores.size());
  for (size_t i = 0; i < hw->cores.size(); ++i) {
    EXPECT_EQ(hw->cores[i].cpus, fs->cores[i].cpus) << "core " << i;
    EXPECT_EQ(hw->cores[i].package, fs->cores[i].package) << "core " << i;
  }
  EXPECT_EQ(hw->numa_nodes.size(), fs->numa_nodes.size());
}

}  // namespace
}  // namespace hone::hw
