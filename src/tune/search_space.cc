#include "tune/search_space.h"

#include <algorithm>
#include <map>
#include <set>

namespace hone::tune {
namespace {

// CPUs the process may use (cgroup cpuset / affinity), or all when unknown.
std::set<int> Allowed(const hw::MachineInfo& m) {
  return {m.cgroup.allowed_cpus.begin(), m.cgroup.allowed_cpus.end()};
}

bool Usable(const std::set<int>& allowed, int cpu) { return allowed.empty() || allowed.count(cpu); }

// The usable physical cores (first threads) of one kind of core.
std::vector<int> CoresOfKind(const hw::MachineInfo& m, const hw::CoreKind& kind,
                             const std::set<int>& allowed) {
  const std::set<int> of(kind.cpus.begin(), kind.cpus.end());
  std::vector<int> out;
  for (const hw::Core& c : m.cores)
    if (!c.cpus.empty() && of.count(c.cpus[0]) && Usable(allowed, c.cpus[0])) out.push_back(c.cpus[0]);
  return out;
}

int PhysicalCores(const hw::MachineInfo& m) {
  int usable = m.usable_cpus();
  int phys = m.physical_cores > 0 ? m.physical_cores : usable;
  return std::max(1, usable > 0 ? std::min(phys, usable) : phys);
}

}  // namespace

std::vector<CpuSet> CpuSets(const hw::MachineInfo& m) {
  std::set<int> allowed = Allowed(m);
  CpuSet phys{"physical", {}}, smt{"smt", {}};
  for (const hw::Core& c : m.cores) {
    if (!c.cpus.empty() && Usable(allowed, c.cpus[0])) phys.cpus.push_back(c.cpus[0]);
  }
  std::vector<CpuSet> out;
  if (phys.cpus.empty()) return out;
  out.push_back(phys);
  if (m.smt_per_core > 1) {
    smt.cpus = phys.cpus;
    for (const hw::Core& c : m.cores) {
      for (size_t i = 1; i < c.cpus.size(); ++i) {
        if (Usable(allowed, c.cpus[i])) smt.cpus.push_back(c.cpus[i]);
      }
    }
    if (smt.cpus.size() > phys.cpus.size()) out.push_back(smt);
  }
  if (m.core_kinds.size() > 1) {
    // Hybrid cores: a thread on a slow core holds the others at each barrier,
    // so the fast kind alone often wins; the slow kind alone, for the record
    // (and for prefill on machines with many small cores).
    CpuSet fast{"fast", CoresOfKind(m, m.core_kinds.front(), allowed)};
    CpuSet slow{"slow", CoresOfKind(m, m.core_kinds.back(), allowed)};
    // Every core, the fast ones first: decode takes the set's first `threads`
    // CPUs and prefill its first `threads_batch`, so with threads up to the
    // fast cores decode runs on them while prefill uses every core.
    CpuSet fast_first{"fast-first", {}};
    for (const hw::CoreKind& k : m.core_kinds) {
      std::vector<int> cores = CoresOfKind(m, k, allowed);
      fast_first.cpus.insert(fast_first.cpus.end(), cores.begin(), cores.end());
    }
    if (!fast.cpus.empty() && fast.cpus.size() < phys.cpus.size()) out.push_back(fast);
    if (!slow.cpus.empty() && slow.cpus.size() < phys.cpus.size()) out.push_back(slow);
    if (fast_first.cpus.size() > fast.cpus.size() && fast_first.cpus != phys.cpus) out.push_back(fast_first);
  }
  if (m.numa_nodes.size() > 1) {
    // llama.cpp's --numa distribute: consecutive threads on alternating nodes,
    // so any thread count draws on every node's memory controllers.
    std::map<int, std::vector<int>> by_node;
    for (const hw::Core& c : m.cores) {
      if (!c.cpus.empty() && Usable(allowed, c.cpus[0])) by_node[c.numa_node].push_back(c.cpus[0]);
    }
    CpuSet inter{"interleave", {}};
    for (size_t i = 0; inter.cpus.size() < phys.cpus.size(); ++i) {
      for (auto& [node, cpus] : by_node) {
        if (i < cpus.size()) inter.cpus.push_back(cpus[i]);
      }
    }
    if (by_node.size() > 1) out.push_back(inter);
    for (const hw::NumaNode& n : m.numa_nodes) {
      CpuSet s{"node" + std::to_string(n.id), {}};
      for (const hw::Core& c : m.cores) {
        if (c.numa_node == n.id && !c.cpus.empty() && Usable(allowed, c.cpus[0])) s.cpus.push_back(c.cpus[0]);
      }
      if (!s.cpus.empty()) out.push_back(s);
    }
  }
  return out;
}

std::vector<int> ThreadCandidates(const hw::MachineInfo& m) {
  const int phys = PhysicalCores(m);
  std::set<int> t;
  for (int p = 1; p < phys; p *= 2) t.insert(p);
  t.insert(phys);
  if (phys >= 6) t.insert(phys * 3 / 4);  // leave a core or two for the OS and the main thread
  if (phys >= 4) t.insert(phys - 1);
  for (const hw::NumaNode& n : m.numa_nodes) {
    int cores = 0;
    for (const hw::Core& c : m.cores) cores += c.numa_node == n.id;
    if (m.numa_nodes.size() > 1 && cores > 0 && cores < phys) t.insert(cores);
  }
  int logical = m.usable_cpus();
  if (m.smt_per_core > 1 && logical > phys) t.insert(logical);
  // One thread per core of each kind: what the "fast" and "slow" placements hold.
  if (m.core_kinds.size() > 1) {
    for (const hw::CoreKind* k : {&m.core_kinds.front(), &m.core_kinds.back()}) {
      const int n = static_cast<int>(CoresOfKind(m, *k, Allowed(m)).size());
      if (n > 0 && n <= phys) t.insert(n);
    }
  }
  return {t.begin(), t.end()};
}

namespace {

// No pinning, or each named CPU set loosely (where it is not every usable
// CPU: that is what "none" already does) and strictly.
Dimension PlacementDimension(const hw::MachineInfo& m) {
  Dimension place{"placement", {{"none", [](Config& c) {
                                   c.placement = "none";
                                   c.cpus.clear();
                                   c.strict_cpu = false;
                                 }}}};
  const size_t all = static_cast<size_t>(m.usable_cpus());
  for (const CpuSet& set : CpuSets(m)) {
    // Loose pinning to every usable CPU is what "none" already does.
    if (set.cpus.size() < all) {
      place.values.push_back({set.name, [set](Config& c) {
                                c.placement = set.name;
                                c.cpus = set.cpus;
                                c.strict_cpu = false;
                              }});
    }
    place.values.push_back({set.name + "+strict", [set](Config& c) {
                              c.placement = set.name;
                              c.cpus = set.cpus;
                              c.strict_cpu = true;
                            }});
  }
  return place;
}

// Prefill's own CPUs, searched apart from decode's on machines with two kinds
// of cores: decode is one token per step, held at ggml's barrier by its
// slowest thread, while prefill is long matrix work that slow cores still add
// to. "same" keeps the decode placement's set for both phases.
Dimension PlacementBatchDimension(const hw::MachineInfo& m) {
  Dimension place{"placement_batch", {{"same", [](Config& c) {
                                         c.placement_batch.clear();
                                         c.cpus_batch.clear();
                                       }}}};
  if (m.core_kinds.size() < 2) return place;
  for (const CpuSet& set : CpuSets(m)) {
    if (set.name != "fast" && set.name != "slow" && set.name != "physical") continue;
    const std::string label = set.name == "physical" ? "both" : set.name;
    place.values.push_back({label, [set, label](Config& c) {
                              c.placement_batch = label;
                              c.cpus_batch = set.cpus;
                            }});
  }
  return place;
}

// How the weights are loaded: mmap or read, repacked or not, AMX or not.
Dimension LoadDimension(const SpaceRequest& r) {
  Dimension load{"load", {}};
  auto add_load = [&load](const std::string& label, engine::LoadMode mode, bool repack, bool amx = true) {
    load.values.push_back({label, [mode, repack, amx](Config& c) {
                             c.load_mode = mode;
                             c.repack = repack;
                             c.amx = amx;
                           }});
  };
  add_load("mmap+repack", engine::LoadMode::kMmap, true);
  // Where AMX works, whether its kernels beat the AVX-512 repacked layouts
  // depends on the weight type and the batch (prefill gains most): measured.
  if (r.amx_usable) add_load("mmap+repack,no-amx", engine::LoadMode::kMmap, true, false);
  add_load("mmap,no-repack", engine::LoadMode::kMmap, false);
  add_load("no-mmap+repack", engine::LoadMode::kNoMmap, true);
  if (r.mlock_allowed) add_load("mlock+repack", engine::LoadMode::kMlock, true);
  return load;
}

}  // namespace

SearchSpace BuildSearchSpace(const hw::MachineInfo& m, const SpaceRequest& r) {
  SearchSpace s;
  const int phys = PhysicalCores(m);
  s.defaults = DefaultConfig(phys, r.workload == Workload::kChat ? 1 : r.concurrency);

  Dimension threads{"threads", {}}, tbatch{"threads_batch", {}};
  for (int t : ThreadCandidates(m)) {
    threads.values.push_back({std::to_string(t), [t](Config& c) { c.threads = t; }});
    tbatch.values.push_back({std::to_string(t), [t](Config& c) { c.threads_batch = t; }});
  }
  Dimension place = PlacementDimension(m);
  Dimension place_batch = PlacementBatchDimension(m);
  Dimension poll{"poll", {}};
  // OpenMP builds of ggml ignore the poll level: only the default is left, and
  // the one-value dimension is dropped below.
  for (int p : r.poll_applies ? std::vector<int>{0, 50, 100} : std::vector<int>{50})
    poll.values.push_back({std::to_string(p), [p](Config& c) { c.poll = p; }});
  // The logical batch: how many prompt tokens one decode call takes (the
  // micro-batch splits it). Values the workload's prompts cannot fill are left
  // out; the defaults (2048 and 512) are always values.
  const int prompt_batch = r.prompt_tokens * std::max(1, r.workload == Workload::kChat ? 1 : r.concurrency);
  Dimension ubatch{"ubatch", {}};
  for (int u : {64, 128, 256, 512, 1024}) {
    if (u == 512 || u < prompt_batch) {
      ubatch.values.push_back({std::to_string(u), [u](Config& c) { c.n_ubatch = u; }});
    }
  }
  Dimension batch{"batch", {}};
  for (int b : {256, 512, 1024, 2048}) {
    if (b == 2048 || b < prompt_batch)
      batch.values.push_back({std::to_string(b), [b](Config& c) { c.n_batch = b; }});
  }
  Dimension fa{"flash_attn", {}};
  // "auto" (the default) resolves to one of these two, so the grid tries both.
  for (auto f : {engine::FlashAttn::kOn, engine::FlashAttn::kOff}) {
    fa.values.push_back({engine::FlashAttnName(f), [f](Config& c) { c.flash_attn = f; }});
  }
  s.grid = {threads, tbatch, place, place_batch, poll, ubatch, batch, fa};
  // A dimension with one value has nothing to search.
  std::erase_if(s.grid, [](const Dimension& d) { return d.values.size() < 2; });

  Dimension kv{"kv_type", {}};
  for (const char* t : {"f16", "q8_0"}) kv.values.push_back({t, [t](Config& c) { c.kv_type = t; }});
  Dimension load = LoadDimension(r);
  s.extra = {kv, load};
  if (r.workload == Workload::kServer && r.concurrency > 1) {
    // Server slots: fewer slots than clients queue the rest (lower KV memory,
    // faster streams), more would sit idle. Decided first: it sets the batch
    // every other parameter is measured with, and matters most to a server.
    Dimension slots{"parallel", {}};
    std::set<int> values{r.concurrency};
    for (int p = 1; p < r.concurrency; p *= 2) values.insert(p);
    for (int p : values) slots.values.push_back({std::to_string(p), [p](Config& c) { c.n_parallel = p; }});
    s.early.push_back(slots);
  }

  // Strict placement runs one thread per listed CPU: more threads than CPUs cannot be placed.
  s.valid = [](const Config& c) {
    // Prefill's own set only beside a pinned decode, and only where it differs.
    if (!c.cpus_batch.empty()) {
      if (c.cpus.empty()) return false;
      std::set<int> decode(c.cpus.begin(), c.cpus.end()), batch(c.cpus_batch.begin(), c.cpus_batch.end());
      if (decode == batch) return false;
    }
    if (c.strict_cpu) {
      const size_t batch_cpus = c.cpus_batch.empty() ? c.cpus.size() : c.cpus_batch.size();
      if (static_cast<size_t>(c.threads) > c.cpus.size() || static_cast<size_t>(c.threads_batch) > batch_cpus)
        return false;
    }
    return c.n_ubatch <= c.n_batch;
  };
  return s;
}

}  // namespace hone::tune
