// The search space, derived from the machine probe rather than blind ranges:
// thread counts up to the usable cores (powers of two plus the core count of a
// NUMA node and of the machine, and the SMT count when there is SMT), CPU sets
// built from the core topology (physical cores only, with SMT siblings, one
// NUMA node), and batch sizes limited to what the workload's prompt can fill.
#pragma once

#include <string>
#include <vector>

#include "hw/probe.h"
#include "tune/search.h"

namespace hone::tune {

struct SpaceRequest {
  Workload workload = Workload::kChat;
  int prompt_tokens = 128;
  int concurrency = 1;
  uint64_t model_bytes = 0;   // for the mlock check against RLIMIT_MEMLOCK
  bool mlock_allowed = true;  // false when RLIMIT_MEMLOCK is below model_bytes
  bool poll_applies = true;   // false on OpenMP builds of ggml (engine::UsesOpenMp)
  bool amx_usable = false;    // AMX kernels can take the weights (engine::Amx().usable): searched on/off
};

// A named set of logical CPUs to pin threads to.
struct CpuSet {
  std::string name;  // "physical", "smt", "node1"
  std::vector<int> cpus;
};

// Primary CPU of each physical core ("physical"), all siblings with primaries
// first ("smt", only with SMT), and each NUMA node's primaries ("nodeN", only
// with more than one node). Sets that equal every usable CPU are kept: strict
// pinning still differs from letting the OS schedule.
std::vector<CpuSet> CpuSets(const hw::MachineInfo& m);

// Thread counts worth trying on this machine, ascending.
std::vector<int> ThreadCandidates(const hw::MachineInfo& m);

SearchSpace BuildSearchSpace(const hw::MachineInfo& m, const SpaceRequest& r);

}  // namespace hone::tune
