#include "tune/search_space.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hw/probe.h"
#include "testing/test_env.h"
#include "tune/isolation.h"

namespace hone::tune {
namespace {

hw::MachineInfo Machine(int cores, int smt, int nodes) {
  hw::MachineInfo m;
  m.physical_cores = cores;
  m.logical_cpus = cores * smt;
  m.smt_per_core = smt;
  for (int n = 0; n < nodes; ++n) m.numa_nodes.push_back({n, {}, 0});
  for (int c = 0; c < cores; ++c) {
    hw::Core core;
    core.id = c;
    core.numa_node = c * nodes / cores;
    for (int s = 0; s < smt; ++s) core.cpus.push_back(c + s * cores);
    m.cores.push_back(core);
  }
  return m;
}

bool Has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(SearchSpace, ThreadCountsComeFromTheTopology) {
  std::vector<int> t = ThreadCandidates(Machine(16, 2, 2));
  for (int x : {1, 2, 4, 8, 12, 15, 16, 32}) EXPECT_TRUE(Has(t, x)) << x;
  EXPECT_FALSE(Has(t, 64));
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_EQ(ThreadCandidates(Machine(2, 1, 1)), (std::vector<int>{1, 2}));
}

TEST(SearchSpace, CgroupQuotaLimitsThreads) {
  hw::MachineInfo m = Machine(16, 2, 1);
  m.cgroup.cpu_quota = 4;
  std::vector<int> t = ThreadCandidates(m);
  EXPECT_EQ(t.back(), 4);
}

TEST(SearchSpace, CpuSetsSeparatePhysicalCoresSmtAndNodes) {
  std::vector<CpuSet> sets = CpuSets(Machine(8, 2, 2));
  ASSERT_EQ(sets.size(), 5u);
  EXPECT_EQ(sets[0].name, "physical");
  EXPECT_EQ(sets[0].cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(sets[1].name, "smt");
  EXPECT_EQ(sets[1].cpus.size(), 16u);
  EXPECT_EQ(sets[1].cpus[8], 8);  // siblings after the primaries
  // The NUMA strategies: threads alternate between nodes, or stay on one.
  EXPECT_EQ(sets[2].name, "interleave");
  EXPECT_EQ(sets[2].cpus, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(sets[3].name, "node0");
  EXPECT_EQ(sets[3].cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(sets[4].cpus, (std::vector<int>{4, 5, 6, 7}));
  // A small machine: one set, no SMT, one node.
  EXPECT_EQ(CpuSets(Machine(2, 1, 1)).size(), 1u);
}

hw::MachineInfo FixtureMachine(const std::string& name) {
  hw::ProbeOptions o;
  o.fs_root = testing::SourceDir() + "/tests/fixtures/sysfs/" + name;
  o.measure_bandwidth = false;
  auto m = hw::Probe(o);
  EXPECT_TRUE(m.ok()) << m.error().ToString();
  return m.ok() ? *m : hw::MachineInfo{};
}

const CpuSet* Named(const std::vector<CpuSet>& sets, const std::string& name) {
  for (const CpuSet& s : sets)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(SearchSpace, HybridIntelPlacesThreadsOnTheFastOrTheSlowKind) {
  hw::MachineInfo m = FixtureMachine("intel_hybrid_laptop");
  std::vector<CpuSet> sets = CpuSets(m);
  const CpuSet* fast = Named(sets, "fast");
  const CpuSet* slow = Named(sets, "slow");
  ASSERT_NE(fast, nullptr);
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(fast->cpus, (std::vector<int>{0, 2, 4, 6}));  // one thread per performance core
  EXPECT_EQ(slow->cpus, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  // "physical" already lists the performance cores first (decode with 4
  // threads runs there, prefill on every core), so no "fast-first" beside it.
  ASSERT_NE(Named(sets, "physical"), nullptr);
  EXPECT_EQ(Named(sets, "physical")->cpus[3], 6);
  EXPECT_EQ(Named(sets, "fast-first"), nullptr);
  std::vector<int> t = ThreadCandidates(m);
  EXPECT_TRUE(Has(t, 4)) << "the performance cores alone";
  EXPECT_TRUE(Has(t, 8)) << "the efficiency cores alone";
  EXPECT_TRUE(Has(t, 12)) << "every core";
  // The placements reach the tuner's search space, loose and strict.
  bool fast_strict = false;
  const SearchSpace space = BuildSearchSpace(m, SpaceRequest{});
  for (const auto* dims : {&space.early, &space.grid, &space.extra})
    for (const Dimension& d : *dims)
      for (const auto& v : d.values) fast_strict |= v.label == "fast+strict";
  EXPECT_TRUE(fast_strict);
  // Prefill's CPUs are searched apart from decode's: the same set, either kind or both.
  const Dimension* prefill = nullptr;
  for (const Dimension& d : space.grid)
    if (d.name == "placement_batch") prefill = &d;
  ASSERT_NE(prefill, nullptr);
  std::vector<std::string> labels;
  for (const auto& v : prefill->values) labels.push_back(v.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"same", "both", "fast", "slow"}));
  Config decode_fast_prefill_both = space.defaults;
  for (const Dimension& d : space.grid) {
    for (const auto& v : d.values) {
      if ((d.name == "placement" && v.label == "fast+strict") ||
          (d.name == "placement_batch" && v.label == "both"))
        v.apply(decode_fast_prefill_both);
    }
  }
  decode_fast_prefill_both.threads = 4;
  decode_fast_prefill_both.threads_batch = 12;
  EXPECT_EQ(decode_fast_prefill_both.cpus, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(decode_fast_prefill_both.cpus_batch.size(), 12u);
  EXPECT_TRUE(space.valid(decode_fast_prefill_both)) << "4 decode threads on 4 fast cores, 12 prefill on all";
  decode_fast_prefill_both.threads = 5;
  EXPECT_FALSE(space.valid(decode_fast_prefill_both)) << "strict: a fifth decode thread has no fast core";
  EXPECT_NE(decode_fast_prefill_both.Key().find("cpusb=both"), std::string::npos);
  Config same_set = decode_fast_prefill_both;
  same_set.threads = 4;
  same_set.cpus_batch = {6, 4, 2, 0};
  EXPECT_FALSE(space.valid(same_set)) << "prefill's own set equal to decode's is the \"same\" point";
  same_set.cpus.clear();
  same_set.strict_cpu = false;
  EXPECT_FALSE(space.valid(same_set)) << "prefill pinned beside an unpinned decode is not searched";
  engine::SessionOptions so = decode_fast_prefill_both.ToSessionOptions(512);
  EXPECT_EQ(so.cpus_batch, decode_fast_prefill_both.cpus_batch);
  // One kind of core: nothing to search apart.
  for (const Dimension& d : BuildSearchSpace(Machine(8, 2, 1), {}).grid) EXPECT_NE(d.name, "placement_batch");
}

TEST(SearchSpace, ArmBigLittleBoardSearchesTheBigCores) {
  hw::MachineInfo m = FixtureMachine("arm_biglittle");
  std::vector<CpuSet> sets = CpuSets(m);
  ASSERT_NE(Named(sets, "fast"), nullptr);
  EXPECT_EQ(Named(sets, "fast")->cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(Named(sets, "slow")->cpus, (std::vector<int>{0, 1, 2, 3}));
  // The kernel numbers the little cores first: "fast-first" puts the big ones
  // at the front, so decode with 4 threads lands on them, prefill on all 8.
  ASSERT_NE(Named(sets, "fast-first"), nullptr);
  EXPECT_EQ(Named(sets, "fast-first")->cpus, (std::vector<int>{4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_TRUE(Has(ThreadCandidates(m), 4));
  hw::MachineInfo quota = m;
  quota.cgroup.cpu_quota = 2;  // per-kind counts never exceed what the process may use
  EXPECT_EQ(ThreadCandidates(quota).back(), 2);
  // One kind of core: no such sets.
  EXPECT_EQ(Named(CpuSets(Machine(8, 2, 1)), "fast"), nullptr);
}

TEST(SearchSpace, StrictPlacementNeedsACpuPerThread) {
  SearchSpace s = BuildSearchSpace(Machine(8, 2, 2), {});
  Config c = s.defaults;
  c.placement = "node0";
  c.cpus = {0, 1, 2, 3};
  c.strict_cpu = true;
  c.threads = c.threads_batch = 4;
  EXPECT_TRUE(s.valid(c));
  c.threads_batch = 8;
  EXPECT_FALSE(s.valid(c));
  c.strict_cpu = false;
  EXPECT_TRUE(s.valid(c));
}

TEST(SearchSpace, DefaultsAreLlamaCppsAndMicroBatchesFitThePrompt) {
  SpaceRequest r;
  r.prompt_tokens = 100;
  SearchSpace s = BuildSearchSpace(Machine(4, 1, 1), r);
  EXPECT_EQ(s.defaults.threads, 4);
  EXPECT_EQ(s.defaults.threads_batch, 4);
  EXPECT_EQ(s.defaults.n_batch, 2048);
  EXPECT_EQ(s.defaults.n_ubatch, 512);
  EXPECT_EQ(s.defaults.placement, "none");
  const Dimension* ub = nullptr;
  for (const Dimension& d : s.grid) {
    if (d.name == "ubatch") ub = &d;
  }
  ASSERT_NE(ub, nullptr);
  std::vector<std::string> labels;
  for (const auto& v : ub->values) labels.push_back(v.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"64", "512"}));
}

TEST(SearchSpace, MlockIsLeftOutWhenTheLimitForbidsIt) {
  SpaceRequest r;
  r.mlock_allowed = false;
  SearchSpace s = BuildSearchSpace(Machine(2, 1, 1), r);
  for (const Dimension& d : s.extra) {
    for (const auto& v : d.values) EXPECT_EQ(v.label.find("mlock"), std::string::npos);
  }
}

TEST(SearchSpace, ServerDefaultsUseOneSlotPerStream) {
  SpaceRequest r;
  r.workload = Workload::kServer;
  r.concurrency = 6;
  EXPECT_EQ(BuildSearchSpace(Machine(2, 1, 1), r).defaults.n_parallel, 6);
}

const Dimension* Find(const std::vector<Dimension>& dims, const std::string& name) {
  for (const Dimension& d : dims) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::vector<std::string> Labels(const Dimension* d) {
  std::vector<std::string> out;
  if (d) {
    for (const auto& v : d->values) out.push_back(v.label);
  }
  return out;
}

TEST(SearchSpace, LogicalBatchIsSearchedWhenThePromptsCanFillIt) {
  SpaceRequest r;
  r.prompt_tokens = 100;  // a chat prompt fills no batch below the default
  EXPECT_EQ(Find(BuildSearchSpace(Machine(4, 1, 1), r).grid, "batch"), nullptr);
  r.workload = Workload::kBatch;
  r.concurrency = 8;  // 800 prompt tokens per decode call
  EXPECT_EQ(Labels(Find(BuildSearchSpace(Machine(4, 1, 1), r).grid, "batch")),
            (std::vector<std::string>{"256", "512", "2048"}));
}

TEST(SearchSpace, PollIsLeftOutWhereItDoesNothing) {
  SpaceRequest r;
  EXPECT_EQ(Labels(Find(BuildSearchSpace(Machine(4, 1, 1), r).grid, "poll")),
            (std::vector<std::string>{"0", "50", "100"}));
  r.poll_applies = false;  // an OpenMP build
  SearchSpace s = BuildSearchSpace(Machine(4, 1, 1), r);
  EXPECT_EQ(Find(s.grid, "poll"), nullptr);
  EXPECT_EQ(s.defaults.poll, 50);
}

TEST(SearchSpace, ServerSearchesItsSlotCount) {
  SpaceRequest r;
  r.workload = Workload::kServer;
  r.concurrency = 6;
  SearchSpace s = BuildSearchSpace(Machine(4, 1, 1), r);
  EXPECT_EQ(Labels(Find(s.early, "parallel")), (std::vector<std::string>{"1", "2", "4", "6"}));
  r.workload = Workload::kChat;
  EXPECT_EQ(Find(BuildSearchSpace(Machine(4, 1, 1), r).early, "parallel"), nullptr);
}

TEST(SearchSpace, AmxIsSearchedOnAndOffOnlyWhereItWorks) {
  SpaceRequest r;
  SearchSpace plain = BuildSearchSpace(Machine(4, 1, 1), r);
  std::vector<std::string> loads = Labels(Find(plain.extra, "load"));
  EXPECT_EQ(std::count(loads.begin(), loads.end(), "mmap+repack,no-amx"), 0);
  r.amx_usable = true;
  SearchSpace amx = BuildSearchSpace(Machine(4, 1, 1), r);
  loads = Labels(Find(amx.extra, "load"));
  ASSERT_EQ(std::count(loads.begin(), loads.end(), "mmap+repack,no-amx"), 1);
  // The defaults keep AMX; the off value changes nothing but AMX.
  EXPECT_TRUE(amx.defaults.amx);
  Config c = amx.defaults;
  for (const auto& v : Find(amx.extra, "load")->values)
    if (v.label == "mmap+repack,no-amx") v.apply(c);
  EXPECT_FALSE(c.amx);
  EXPECT_TRUE(c.repack);
  EXPECT_FALSE(c.SameModel(amx.defaults));  // a reload, not just a new session
  EXPECT_NE(c.Key().find("no-amx"), std::string::npos);
  EXPECT_FALSE(c.ToLoadOptions().amx);
}

TEST(CrashGuard, ChildRunsTheConfigurationsKernelPathWithHonesOwnFlags) {
  Config c = DefaultConfig(4);
  c.flash_attn = engine::FlashAttn::kOn;
  c.kv_type = "q8_0";
  c.amx = false;
  EXPECT_EQ(CrashGuard::PathKey(c), "repack no-amx fa=on kv=q8_0");
  c.threads = 3;  // threads do not choose kernels: same path
  EXPECT_EQ(CrashGuard::PathKey(c), "repack no-amx fa=on kv=q8_0");
  CrashGuard g(IsolationOptions{"/usr/bin/hone", "m.gguf", 16});
  std::vector<std::string> a = g.ChildArgs(c);
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[0], "/usr/bin/hone");
  EXPECT_EQ(a[1], "run");
  EXPECT_EQ(a[2], "m.gguf");
  auto has = [&a](const std::string& flag, const std::string& value) {
    auto it = std::find(a.begin(), a.end(), flag);
    return it != a.end() && (value.empty() || (it + 1 != a.end() && *(it + 1) == value));
  };
  EXPECT_TRUE(has("--flash-attn", "on"));
  EXPECT_TRUE(has("--kv-type", "q8_0"));
  EXPECT_TRUE(has("-t", "3"));
  EXPECT_TRUE(has("--no-amx", ""));
  EXPECT_TRUE(has("--no-profile", ""));
  EXPECT_FALSE(has("--no-repack", ""));
  // Without a binary there is no isolation: everything passes unchecked.
  CrashGuard none(IsolationOptions{});
  EXPECT_TRUE(none.Check(c).ok());
  EXPECT_EQ(none.children_run(), 0);
}

TEST(Config, ParsesWorkloads) {
  EXPECT_EQ(*ParseWorkload("server"), Workload::kServer);
  auto w = ParseWorkload("interactive");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("chat, batch or server"), std::string::npos);
}

}  // namespace
}  // namespace hone::tune
