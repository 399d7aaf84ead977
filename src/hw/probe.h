// Machine probe: what hone knows about the CPU and memory it runs on.
// Used by `hone info`, by the tuner to derive its search space, and by the
// server's memory admission. Thread-compatible; probing takes ~1 s when the
// bandwidth measurement runs, a few ms otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::hw {

struct CacheLevel {
  int level = 0;            // 1, 2, 3
  std::string type;         // "Data", "Instruction", "Unified"
  uint64_t size_bytes = 0;  // per instance
  int instances = 0;        // how many such caches exist on the machine
  int shared_by_cpus = 0;   // logical CPUs sharing one instance
};

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // logical CPU ids
  uint64_t memory_bytes = 0;
};

struct Core {
  int id = 0;  // physical core index (0..n_cores-1)
  int package = 0;
  int numa_node = 0;
  std::vector<int> cpus;  // logical CPUs (SMT siblings), first is the primary
};

// One kind of core on a machine with several: Intel's performance and
// efficiency cores, ARM's big and LITTLE. A decode thread on a slow core holds
// every other thread at ggml's barrier, so where threads run matters as much
// as how many there are (the tuner searches the kinds as placements).
struct CoreKind {
  std::string name;       // "performance", "efficiency"; ARM: "big", "mid", "little"
  std::vector<int> cpus;  // logical CPUs of this kind
  int capacity = 0;       // relative speed from the source (cpu_capacity: 1024 = fastest; hwloc: its rank)
};

struct CgroupLimits {
  double cpu_quota = 0;             // CPUs allowed by cpu.max (0 = unlimited)
  uint64_t memory_limit_bytes = 0;  // memory.max (0 = unlimited)
  uint64_t memory_usage_bytes = 0;  // memory.current
  std::vector<int> allowed_cpus;    // cpuset.cpus.effective (or sched affinity)
};

struct Bandwidth {
  double read_gbps = 0;  // best of the runs, GB/s (1e9 bytes)
  double read_gbps_mean = 0;
  double read_gbps_ci95 = 0;
  int threads = 0;
  uint64_t buffer_bytes = 0;
  int runs = 0;
};

struct MachineInfo {
  std::string cpu_model;
  std::string arch;  // "x86_64", "aarch64"
  int packages = 0;
  int physical_cores = 0;
  int logical_cpus = 0;
  int smt_per_core = 1;
  std::vector<Core> cores;
  std::vector<NumaNode> numa_nodes;
  std::vector<CacheLevel> caches;
  std::vector<std::string> isa;  // "AVX2", "AVX512F", "AVX512_VNNI", "AMX_INT8", "NEON", "SVE", ...
  // Fastest first; empty when every core is alike. core_kinds_source says where
  // they came from: "hwloc cpukinds", "intel hybrid (sysfs)" or "cpu_capacity".
  std::vector<CoreKind> core_kinds;
  std::string core_kinds_source;
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;
  CgroupLimits cgroup;
  Bandwidth bandwidth;  // zero when not measured
  // Memory the process may really use: min(available, cgroup limit - usage).
  uint64_t usable_memory_bytes() const;
  // CPUs the process may really use: min(logical, allowed, ceil(quota)).
  int usable_cpus() const;
  bool has_isa(const std::string& name) const;
};

struct ProbeOptions {
  bool measure_bandwidth = true;
  int bandwidth_threads = 0;       // 0 = one per physical core
  double bandwidth_seconds = 1.0;  // total time budget for the measurement
  // Root for /proc and /sys (tests point it at a fixture tree).
  std::string fs_root = "/";
};

Result<MachineInfo> Probe(const ProbeOptions& options = {});

// A short stable fingerprint of the hardware (model, cores, caches, memory
// size rounded, ISA): equal on the same machine across reboots.
std::string Fingerprint(const MachineInfo& info);

}  // namespace hone::hw
