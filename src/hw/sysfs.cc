#include "hw/sysfs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace hone::hw {
namespace {

namespace fs = std::filesystem;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

Error Corrupt(const std::string& path, std::string_view what) {
  return MakeError(ErrorCode::kCorrupt, path + ": " + std::string(what));
}

// The hone ISA names and the cpuinfo flags they come from, in report order.
struct IsaFlag {
  const char* flag;
  const char* name;
};
constexpr IsaFlag kX86Isa[] = {
    {"sse4_2", "SSE4_2"},
    {"avx", "AVX"},
    {"avx2", "AVX2"},
    {"fma", "FMA"},
    {"f16c", "F16C"},
    {"avx512f", "AVX512F"},
    {"avx512bw", "AVX512BW"},
    {"avx512vl", "AVX512VL"},
    {"avx512_vnni", "AVX512_VNNI"},
    {"avx512_bf16", "AVX512_BF16"},
    {"avx_vnni", "AVX_VNNI"},
    {"amx_tile", "AMX_TILE"},
    {"amx_int8", "AMX_INT8"},
    {"amx_bf16", "AMX_BF16"},
};
constexpr IsaFlag kArmIsa[] = {
    {"asimd", "NEON"}, {"sve", "SVE"},      {"sve2", "SVE2"}, {"asimddp", "DOTPROD"},
    {"i8mm", "I8MM"},  {"asimdhp", "FP16"}, {"bf16", "BF16"}, {"sme", "SME"},
};

template <size_t N>
std::vector<std::string> MapIsa(std::string_view flags, const IsaFlag (&table)[N]) {
  std::set<std::string, std::less<>> have;
  std::istringstream in{std::string(flags)};
  for (std::string f; in >> f;) have.insert(f);
  std::vector<std::string> isa;
  for (const IsaFlag& e : table) {
    if (have.contains(std::string_view(e.flag))) isa.push_back(e.name);
  }
  return isa;
}

// Directories from the process's own cgroup up to the hierarchy root, deepest
// first: a limit set on any ancestor applies to the process too.
std::vector<std::string> CgroupDirs(const std::string& mount, std::string rel) {
  std::vector<std::string> dirs;
  while (!rel.empty() && rel != "/") {
    dirs.push_back(mount + rel);
    rel.resize(rel.rfind('/'));
  }
  dirs.push_back(mount);
  return dirs;
}

// The process's cgroup path per v1 controller ("cpu", "memory"), and its v2
// path under "". Without /proc/self/cgroup every path is the root.
std::map<std::string, std::string> ProcCgroups(const std::string& root) {
  std::map<std::string, std::string> paths;
  Result<std::string> text = ReadTextFile(RootedPath(root, "/proc/self/cgroup"));
  if (!text.ok()) return paths;
  for (std::string_view line : Split(*text, '\n')) {
    std::vector<std::string_view> f = Split(line, ':');
    if (f.size() < 3) continue;
    std::string path(Trim(line.substr(f[0].size() + f[1].size() + 2)));  // the path may hold ':'
    for (std::string_view c : Split(f[1], ',')) paths[std::string(c)] = path;
  }
  return paths;
}

// Reads `name` in every directory that has it and keeps the smallest limit;
// parse(text, dir, &limit) sets 0 for "no limit" and returns false on garbage.
template <class T, class Parse>
Status MinLimit(const std::vector<std::string>& dirs, const std::string& name, Parse parse, T* out) {
  for (const std::string& dir : dirs) {
    std::string text;
    if (!ReadTrimmed(dir + "/" + name, &text)) continue;
    T limit = 0;
    if (!parse(text, dir, &limit)) return Corrupt(dir + "/" + name, "unexpected content '" + text + "'");
    if (limit > 0 && (*out == 0 || limit < *out)) *out = limit;
  }
  return Status::Ok();
}

// The first of `names` found walking up from the process's own cgroup.
bool LeafFile(const std::vector<std::string>& dirs, std::initializer_list<const char*> names,
              std::string* text, std::string* path) {
  for (const std::string& dir : dirs) {
    for (const char* name : names) {
      *path = dir + "/" + name;
      if (ReadTrimmed(*path, text)) return true;
    }
  }
  return false;
}

}  // namespace

std::string RootedPath(const std::string& root, std::string_view abs_path) {
  std::string r = root.empty() ? "/" : root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (r == "/") return std::string(abs_path);
  return r + std::string(abs_path);
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!Exists(path)) return MakeError(ErrorCode::kNotFound, path + ": no such file");
    return MakeError(ErrorCode::kIo, path + ": cannot open");
  }
  std::ostringstream data;
  data << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, path + ": read failed");
  return data.str();
}

bool ReadTrimmed(const std::string& path, std::string* out) {
  Result<std::string> text = ReadTextFile(path);
  if (!text.ok()) return false;
  *out = std::string(Trim(*text));
  return true;
}

std::vector<int> NumberedEntries(const std::string& dir, std::string_view prefix) {
  std::vector<int> ids;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    int id = 0;
    if (name.starts_with(prefix) && ParseNumber(std::string_view(name).substr(prefix.size()), &id)) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  text = Trim(text);
  if (text.empty()) return cpus;
  for (std::string_view item : Split(text, ',')) {
    std::vector<std::string_view> ends = Split(item, '-');
    int lo = 0, hi = 0;
    bool ok = ends.size() == 1 ? ParseNumber(ends[0], &lo) && ParseNumber(ends[0], &hi)
                               : ends.size() == 2 && ParseNumber(ends[0], &lo) && ParseNumber(ends[1], &hi);
    // The span bound keeps a corrupt "0-2000000000" from allocating gigabytes.
    if (!ok || lo < 0 || hi < lo || hi - lo > (1 << 20)) {
      return MakeError(ErrorCode::kCorrupt, "bad CPU list item '" + std::string(item) + "'");
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

// aarch64 cpuinfo has no model name, only JEDEC implementer and part numbers;
// a big.LITTLE chip lists each of its parts ("ARM Cortex-A55 + Cortex-A76").
std::string ArmModel(int implementer, const std::vector<int>& parts) {
  static const std::map<int, const char*> kImplementers = {
      {0x41, "ARM"}, {0x48, "HiSilicon"}, {0x51, "Qualcomm"}, {0x61, "Apple"}, {0xc0, "Ampere"}};
  static const std::map<int, const char*> kArmParts = {
      {0xd03, "Cortex-A53"},  {0xd05, "Cortex-A55"},  {0xd08, "Cortex-A72"},  {0xd0b, "Cortex-A76"},
      {0xd0c, "Neoverse-N1"}, {0xd0d, "Cortex-A77"},  {0xd40, "Neoverse-V1"}, {0xd41, "Cortex-A78"},
      {0xd44, "Cortex-X1"},   {0xd46, "Cortex-A510"}, {0xd47, "Cortex-A710"}, {0xd48, "Cortex-X2"},
      {0xd49, "Neoverse-N2"}, {0xd4d, "Cortex-A715"}, {0xd4e, "Cortex-X3"},   {0xd4f, "Neoverse-V2"},
      {0xd80, "Cortex-A520"}, {0xd81, "Cortex-A720"}, {0xd82, "Cortex-X4"},   {0xd8e, "Neoverse-N3"},
  };
  auto impl = kImplementers.find(implementer);
  std::ostringstream out;
  out << (impl != kImplementers.end() ? impl->second : "ARM-compatible");
  for (size_t i = 0; i < parts.size(); ++i) {
    out << (i ? " + " : " ");
    auto p = kArmParts.find(parts[i]);
    if (implementer == 0x41 && p != kArmParts.end()) {
      out << p->second;
    } else {
      out << "part 0x" << std::hex << parts[i] << std::dec;
    }
  }
  return out.str();
}

Result<CpuInfo> ParseCpuInfo(std::string_view text) {
  CpuInfo info;
  std::string x86_flags, arm_features;
  int implementer = -1;
  std::vector<int> parts;  // distinct, in the order the CPUs list them
  for (std::string_view line : Split(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = Trim(line.substr(0, colon));
    std::string_view value = Trim(line.substr(colon + 1));
    if (key == "processor") {
      CpuInfo::Processor p;
      if (!ParseNumber(value, &p.id)) return MakeError(ErrorCode::kCorrupt, "cpuinfo: bad processor line");
      info.processors.push_back(p);
    } else if (key == "physical id" && !info.processors.empty()) {
      ParseNumber(value, &info.processors.back().package);
    } else if (key == "core id" && !info.processors.empty()) {
      ParseNumber(value, &info.processors.back().core);
    } else if (key == "model name" && info.model.empty()) {
      info.model = value;
    } else if (key == "flags" && x86_flags.empty()) {
      x86_flags = value;
    } else if (key == "Features" && arm_features.empty()) {
      arm_features = value;
    } else if (key == "CPU implementer" && implementer < 0) {
      ParseNumber(value.substr(value.starts_with("0x") ? 2 : 0), &implementer, 16);
    } else if (key == "CPU part") {
      int part = -1;
      if (ParseNumber(value.substr(value.starts_with("0x") ? 2 : 0), &part, 16) &&
          std::find(parts.begin(), parts.end(), part) == parts.end())
        parts.push_back(part);
    }
  }
  if (info.processors.empty()) return MakeError(ErrorCode::kCorrupt, "cpuinfo: no processor entries");
  if (!x86_flags.empty()) {
    info.arch = "x86_64";
    info.isa = MapIsa(x86_flags, kX86Isa);
  } else if (!arm_features.empty()) {
    info.arch = "aarch64";
    info.isa = MapIsa(arm_features, kArmIsa);
    if (info.model.empty() && implementer >= 0) info.model = ArmModel(implementer, parts);
  } else {
    info.arch = "unknown";
  }
  if (info.model.empty()) info.model = "unknown";
  return info;
}

Result<CpuInfo> ReadCpuInfo(const std::string& root) {
  Result<std::string> text = ReadTextFile(RootedPath(root, "/proc/cpuinfo"));
  if (!text.ok()) return text.error();
  return ParseCpuInfo(*text);
}

Result<MemInfo> ParseMemInfo(std::string_view text) {
  std::map<std::string, uint64_t, std::less<>> kb;
  for (std::string_view line : Split(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = Trim(line.substr(colon + 1));
    if (value.ends_with("kB")) value.remove_suffix(2);
    uint64_t n = 0;
    if (ParseNumber(value, &n)) kb[std::string(Trim(line.substr(0, colon)))] = n;
  }
  auto total = kb.find("MemTotal");
  if (total == kb.end() || total->second == 0) return MakeError(ErrorCode::kCorrupt, "meminfo: no MemTotal");
  MemInfo info;
  info.total_bytes = total->second * 1024;
  auto avail = kb.find("MemAvailable");
  // Kernels before 3.14 lack MemAvailable; free + page cache approximates it.
  info.available_bytes =
      avail != kb.end() ? avail->second * 1024 : (kb["MemFree"] + kb["Buffers"] + kb["Cached"]) * 1024;
  return info;
}

Result<MemInfo> ReadMemInfo(const std::string& root) {
  Result<std::string> text = ReadTextFile(RootedPath(root, "/proc/meminfo"));
  if (!text.ok()) return text.error();
  return ParseMemInfo(*text);
}

Result<CgroupLimits> ReadCgroupLimits(const std::string& root) {
  CgroupLimits limits;
  std::map<std::string, std::string> procs = ProcCgroups(root);
  std::string base = RootedPath(root, "/sys/fs/cgroup");
  // A hybrid layout (v1 controllers plus an empty /sys/fs/cgroup/unified)
  // counts as v1: the limits live in the v1 hierarchies.
  bool v2 = Exists(base + "/cgroup.controllers");
  auto v1_dirs = [&](std::initializer_list<const char*> mounts, const std::string& controller) {
    for (const char* m : mounts) {
      if (Exists(base + "/" + m)) return CgroupDirs(base + "/" + m, procs[controller]);
    }
    return std::vector<std::string>{};
  };
  std::vector<std::string> cpu = v2 ? CgroupDirs(base, procs[""]) : v1_dirs({"cpu", "cpu,cpuacct"}, "cpu");
  std::vector<std::string> mem = v2 ? cpu : v1_dirs({"memory"}, "memory");
  std::vector<std::string> cpuset = v2 ? cpu : v1_dirs({"cpuset"}, "cpuset");

  auto v2_cpu = [](const std::string& text, const std::string&, double* quota) {
    // "max 100000" (no quota) or "200000 100000" (two CPUs' worth per period).
    std::istringstream in(text);
    std::string max;
    int64_t n = 0, period = 0;
    if (!(in >> max >> period) || period <= 0) return false;
    if (max == "max") return true;
    if (!ParseNumber(max, &n) || n <= 0) return false;
    *quota = static_cast<double>(n) / period;
    return true;
  };
  auto v1_cpu = [](const std::string& text, const std::string& dir, double* quota) {
    int64_t n = 0, period = 100000;  // the kernel default, used if the file is missing
    std::string p;
    if (ReadTrimmed(dir + "/cpu.cfs_period_us", &p) && (!ParseNumber(p, &period) || period <= 0))
      return false;
    if (!ParseNumber(text, &n)) return false;
    if (n > 0) *quota = static_cast<double>(n) / period;  // -1 means no quota
    return true;
  };
  auto v2_mem = [](const std::string& text, const std::string&, uint64_t* bytes) {
    return text == "max" || ParseNumber(text, bytes);
  };
  auto v1_mem = [](const std::string& text, const std::string&, uint64_t* bytes) {
    // v1 spells "unlimited" as LONG_MAX rounded down to a page.
    if (!ParseNumber(text, bytes)) return false;
    if (*bytes >= (1ull << 60)) *bytes = 0;
    return true;
  };
  Status s = v2 ? MinLimit(cpu, "cpu.max", v2_cpu, &limits.cpu_quota)
                : MinLimit(cpu, "cpu.cfs_quota_us", v1_cpu, &limits.cpu_quota);
  if (!s.ok()) return s.error();
  s = v2 ? MinLimit(mem, "memory.max", v2_mem, &limits.memory_limit_bytes)
         : MinLimit(mem, "memory.limit_in_bytes", v1_mem, &limits.memory_limit_bytes);
  if (!s.ok()) return s.error();

  std::string text, path;
  if (LeafFile(mem, {v2 ? "memory.current" : "memory.usage_in_bytes"}, &text, &path) &&
      !ParseNumber(text, &limits.memory_usage_bytes)) {
    return Corrupt(path, "unexpected content '" + text + "'");
  }
  if (LeafFile(cpuset, {"cpuset.cpus.effective", "cpuset.effective_cpus", "cpuset.cpus"}, &text, &path)) {
    Result<std::vector<int>> cpus = ParseCpuList(text);
    if (!cpus.ok()) return Corrupt(path, cpus.error().message);
    limits.allowed_cpus = *cpus;
  }
  return limits;
}

}  // namespace hone::hw
