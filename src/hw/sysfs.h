// Parsers for the Linux /proc and /sys text files the probe reads. Every reader
// takes the filesystem root ("/" live, a fixture tree in tests) so all of it is
// testable without the machine it describes. The sysfs topology reader lives
// in probe.cc beside the hwloc one, so the two stay alike.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hw/probe.h"
#include "util/result.h"

namespace hone::hw {

// root + an absolute path ("/proc/meminfo"), without doubling the slash.
std::string RootedPath(const std::string& root, std::string_view abs_path);

// The whole file; kNotFound when it does not exist, kIo when it cannot be read.
Result<std::string> ReadTextFile(const std::string& path);

// A small file's content without surrounding whitespace; false when it cannot
// be read (optional sysfs and cgroup files are simply absent).
bool ReadTrimmed(const std::string& path, std::string* out);

// The numbers N of the entries named <prefix>N in dir ("cpu0", "node1"), sorted.
std::vector<int> NumberedEntries(const std::string& dir, std::string_view prefix);

inline std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// An integer filling the whole (trimmed) text.
template <class T>
bool ParseNumber(std::string_view s, T* out, int base = 10) {
  s = Trim(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// Linux CPU list syntax: "0-3,8,10-11" -> {0,1,2,3,8,10,11}, sorted and
// deduplicated. Whitespace around items is ignored; "" gives an empty list.
Result<std::vector<int>> ParseCpuList(std::string_view text);

struct CpuInfo {
  struct Processor {
    int id = 0;
    int package = -1;  // "physical id" (x86 only; -1 when absent)
    int core = -1;     // "core id" (x86 only)
  };
  std::string model;
  std::string arch;              // inferred from the format: "x86_64" or "aarch64"
  std::vector<std::string> isa;  // hone names, in a fixed order
  std::vector<Processor> processors;
};

Result<CpuInfo> ParseCpuInfo(std::string_view text);

// An ARM CPU's name from its JEDEC implementer and part numbers (cpuinfo's
// "CPU implementer"/"CPU part", or MIDR_EL1); a big.LITTLE chip lists each of
// its parts ("ARM Cortex-A55 + Cortex-A76").
std::string ArmModel(int implementer, const std::vector<int>& parts);
Result<CpuInfo> ReadCpuInfo(const std::string& root);

struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;
};

Result<MemInfo> ParseMemInfo(std::string_view text);
Result<MemInfo> ReadMemInfo(const std::string& root);

// cgroup v2 (unified) limits when /sys/fs/cgroup/cgroup.controllers exists,
// else cgroup v1. Missing files mean "no limit"; malformed ones are kCorrupt.
// allowed_cpus comes from the cpuset files and stays empty when there are none.
Result<CgroupLimits> ReadCgroupLimits(const std::string& root);

}  // namespace hone::hw
