// Kinds of cores (hybrid Intel, ARM big.LITTLE), from what Linux shows in
// sysfs: for fixture trees, and live where hwloc ranks none (probe.cc asks
// hwloc's cpukinds first).
#pragma once

#include <string>
#include <vector>

#include "hw/probe.h"

namespace hone::hw {

// Intel's hybrid PMUs (/sys/devices/cpu_core/cpus and cpu_atom/cpus: the
// kernel's reading of the hybrid CPUID leaf), else ARM's per-CPU
// cpu_capacity. Fastest first; empty when there is one kind. *source names
// the one used.
std::vector<CoreKind> SysfsCoreKinds(const std::string& root, const std::vector<int>& cpus,
                                     std::string* source);

// Joins neighbouring kinds (sorted fastest first) whose capacities are within
// 10% of each other: one kind of core reported with slightly different values.
void MergeCloseKinds(std::vector<CoreKind>* kinds);

// Names kinds sorted fastest first: Intel's core types keep theirs; others
// are "big" and "little", with "mid" between (more: "kind N").
void NameByRank(std::vector<CoreKind>* kinds);

}  // namespace hone::hw
