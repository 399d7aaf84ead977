#include "hw/core_kinds.h"

#include <algorithm>
#include <map>

#include "hw/sysfs.h"

namespace hone::hw {
namespace {

std::vector<int> CpuListFile(const std::string& path) {
  std::string text;
  if (!ReadTrimmed(path, &text)) return {};
  Result<std::vector<int>> cpus = ParseCpuList(text);
  return cpus.ok() ? *cpus : std::vector<int>{};
}

// Intel hybrid: the kernel registers one PMU per core type.
std::vector<CoreKind> IntelHybrid(const std::string& root) {
  std::vector<int> big = CpuListFile(RootedPath(root, "/sys/devices/cpu_core/cpus"));
  std::vector<int> small = CpuListFile(RootedPath(root, "/sys/devices/cpu_atom/cpus"));
  if (big.empty() || small.empty()) return {};
  return {{"performance", big, 0}, {"efficiency", small, 0}};
}

// ARM (and some others): each CPU's capacity, 1024 for the fastest.
std::vector<CoreKind> ByCapacity(const std::string& root, const std::vector<int>& cpus) {
  std::map<int, std::vector<int>, std::greater<>> by;
  for (int cpu : cpus) {
    std::string text;
    int capacity = 0;
    const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpu_capacity";
    if (!ReadTrimmed(RootedPath(root, path), &text) || !ParseNumber(text, &capacity)) return {};
    by[capacity].push_back(cpu);
  }
  std::vector<CoreKind> kinds;
  for (auto& [capacity, list] : by) kinds.push_back({"", list, capacity});
  MergeCloseKinds(&kinds);
  if (kinds.size() < 2) return {};
  NameByRank(&kinds);
  return kinds;
}

}  // namespace

void MergeCloseKinds(std::vector<CoreKind>* kinds) {
  std::vector<CoreKind> merged;
  for (CoreKind& k : *kinds) {
    // Capacities within 10% of the group's fastest are one kind: some SoCs
    // (and uniform servers such as NVIDIA Grace) report 1024 beside 1007.
    if (!merged.empty() && k.capacity > 0 && merged.back().capacity > 0 &&
        k.capacity * 10 >= merged.back().capacity * 9) {
      CoreKind& into = merged.back();
      into.cpus.insert(into.cpus.end(), k.cpus.begin(), k.cpus.end());
      std::sort(into.cpus.begin(), into.cpus.end());
      continue;
    }
    merged.push_back(std::move(k));
  }
  *kinds = std::move(merged);
}

void NameByRank(std::vector<CoreKind>* kinds) {
  const size_t n = kinds->size();
  for (size_t i = 0; i < n; ++i) {
    CoreKind& k = (*kinds)[i];
    if (k.name == "IntelCore") k.name = "performance";
    if (k.name == "IntelAtom") k.name = "efficiency";
    if (!k.name.empty()) continue;
    if (i == 0)
      k.name = "big";
    else if (i + 1 == n)
      k.name = "little";
    else
      k.name = n == 3 ? "mid" : "kind " + std::to_string(i + 1);
  }
}

std::vector<CoreKind> SysfsCoreKinds(const std::string& root, const std::vector<int>& cpus,
                                     std::string* source) {
  std::vector<CoreKind> kinds = IntelHybrid(root);
  if (!kinds.empty()) {
    *source = "intel hybrid (sysfs)";
    return kinds;
  }
  kinds = ByCapacity(root, cpus);
  if (!kinds.empty()) *source = "cpu_capacity";
  return kinds;
}

}  // namespace hone::hw
