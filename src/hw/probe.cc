// Probe: cpuinfo/meminfo/cgroup parsing (sysfs.cc) plus topology from one of
// two sources that fill the same RawTopology: hwloc for the live machine, or a
// direct sysfs reader for fixture trees (and when hwloc fails).
#include "hw/probe.h"

#include <hwloc.h>
#include <sched.h>
#include <strings.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "hw/arm_cpu.h"
#include "hw/bandwidth.h"
#include "hw/core_kinds.h"
#include "hw/sysfs.h"
#include "util/units.h"

namespace hone::hw {
namespace {

struct CacheInstance {
  int level = 0;
  std::string type;  // "Data", "Instruction", "Unified"
  uint64_t size_bytes = 0;
  std::vector<int> cpus;
};

// What a topology source reports before the shared assembly below.
struct RawTopology {
  std::vector<Core> cores;  // package and cpus set; the rest is derived
  std::vector<NumaNode> numa_nodes;
  std::vector<CacheInstance> caches;
  std::vector<CoreKind> kinds;  // hwloc's cpukinds, fastest first; empty when it ranks none
};

std::vector<int> BitmapCpus(hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  int i;
  hwloc_bitmap_foreach_begin(i, set) cpus.push_back(i);
  hwloc_bitmap_foreach_end();
  return cpus;
}

// hwloc's kinds of cores, where it could rank them (efficiency >= 0): it
// lists the most energy-efficient first; ours are fastest first.
std::vector<CoreKind> HwlocCoreKinds(hwloc_topology_t topo) {
  const int n = hwloc_cpukinds_get_nr(topo, 0);
  if (n < 2) return {};
  std::vector<CoreKind> kinds;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (!set) return {};
  for (int i = n - 1; i >= 0; --i) {
    int efficiency = -1;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(topo, i, set, &efficiency, &nr_infos, &infos, 0) != 0 || efficiency < 0) {
      kinds.clear();
      break;
    }
    CoreKind k{"", BitmapCpus(set), efficiency};
    for (unsigned j = 0; j < nr_infos; ++j) {
      const std::string name = infos[j].name;
      if (name == "CoreType") k.name = infos[j].value;
      // hwloc 2.9 ranks kinds of a uniform chip apart by a few points of
      // capacity (open-mpi/hwloc#634): merged below when it reports them.
      if (name == "LinuxCapacity") k.capacity = std::atoi(infos[j].value);
    }
    kinds.push_back(std::move(k));
  }
  hwloc_bitmap_free(set);
  MergeCloseKinds(&kinds);
  if (kinds.size() < 2) return {};
  NameByRank(&kinds);
  return kinds;
}

Result<RawTopology> HwlocTopology() {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return MakeError(ErrorCode::kInternal, "hwloc: init failed");
  // Describe the whole machine, as the sysfs reader does; what this process
  // may use is reported separately (cgroup.allowed_cpus).
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return MakeError(ErrorCode::kInternal, "hwloc: topology load failed");
  }
  RawTopology raw;
  // Some platforms expose no Core objects; each PU then counts as a core.
  hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, core_type, o));) {
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, o);
    Core core;
    core.package = pkg ? static_cast<int>(pkg->logical_index) : 0;
    core.cpus = BitmapCpus(o->cpuset);
    if (!core.cpus.empty()) raw.cores.push_back(std::move(core));
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o));) {
    raw.numa_nodes.push_back(
        {static_cast<int>(o->os_index), BitmapCpus(o->cpuset), o->attr->numanode.local_memory});
  }
  for (hwloc_obj_type_t type :
       {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE}) {
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, type, o));) {
      const auto& a = o->attr->cache;
      const char* kind = a.type == HWLOC_OBJ_CACHE_DATA          ? "Data"
                         : a.type == HWLOC_OBJ_CACHE_INSTRUCTION ? "Instruction"
                                                                 : "Unified";
      raw.caches.push_back({static_cast<int>(a.depth), kind, a.size, BitmapCpus(o->cpuset)});
    }
  }
  raw.kinds = HwlocCoreKinds(topo);
  hwloc_topology_destroy(topo);
  if (raw.cores.empty()) return MakeError(ErrorCode::kInternal, "hwloc: no cores found");
  return raw;
}

Error Corrupt(const std::string& path, const std::string& what) {
  return MakeError(ErrorCode::kCorrupt, path + ": " + what);
}

// Topology from /sys/devices/system under root, or from cpuinfo's per-processor
// ids when the tree has no CPU directory.
// Without sysfs: cores from /proc/cpuinfo's package and core ids.
std::vector<Core> CoresFromCpuInfo(const CpuInfo& cpuinfo) {
  std::map<std::tuple<int, int, int>, Core> cores;
  for (const CpuInfo::Processor& p : cpuinfo.processors) {
    // Without "core id" (aarch64) each processor counts as its own core.
    Core& core = cores[{std::max(p.package, 0), p.core, p.core >= 0 ? -1 : p.id}];
    core.package = std::max(p.package, 0);
    core.cpus.push_back(p.id);
  }
  std::vector<Core> out;
  for (auto& [key, core] : cores) out.push_back(core);
  return out;
}

// Reads sysfs CPU lists and numbers; lists in sysfs may name offline CPUs,
// and the probe describes online ones.
struct OnlineReader {
  const std::vector<int>& online;  // sorted

  Status List(const std::string& path, std::vector<int>* out) const {
    std::string text;
    if (!ReadTrimmed(path, &text)) return Status::Ok();
    Result<std::vector<int>> r = ParseCpuList(text);
    if (!r.ok()) return Corrupt(path, r.error().message);
    out->clear();
    for (int c : *r) {
      if (std::binary_search(online.begin(), online.end(), c)) out->push_back(c);
    }
    return Status::Ok();
  }
  static Status Int(const std::string& path, int* out) {
    std::string text;
    if (ReadTrimmed(path, &text) && !ParseNumber(text, out)) return Corrupt(path, "not a number");
    return Status::Ok();
  }
  // The caches CPU `cpu` (sysfs folder `dir`) sees.
  Status Caches(const std::string& dir, int cpu, std::vector<CacheInstance>* out) const {
    std::error_code ec;
    for (int index = 0; std::filesystem::exists(dir + "/cache/index" + std::to_string(index), ec); ++index) {
      std::string cache = dir + "/cache/index" + std::to_string(index);
      CacheInstance c;
      c.cpus = {cpu};
      std::string size;
      if (!ReadTrimmed(cache + "/type", &c.type) || !ReadTrimmed(cache + "/size", &size)) continue;
      Result<uint64_t> bytes = ParseSize(size);
      if (!bytes.ok()) return Corrupt(cache + "/size", bytes.error().message);
      c.size_bytes = *bytes;
      Status s = Int(cache + "/level", &c.level);
      if (s.ok()) s = List(cache + "/shared_cpu_list", &c.cpus);
      if (!s.ok()) return s;
      out->push_back(std::move(c));
    }
    return Status::Ok();
  }
};

Result<RawTopology> SysfsTopology(const std::string& root, const CpuInfo& cpuinfo) {
  RawTopology raw;
  std::string cpu_dir = RootedPath(root, "/sys/devices/system/cpu");
  std::string text;
  std::vector<int> online;
  if (ReadTrimmed(cpu_dir + "/online", &text)) {
    Result<std::vector<int>> r = ParseCpuList(text);
    if (!r.ok()) return Corrupt(cpu_dir + "/online", r.error().message);
    online = *r;
  } else {
    online = NumberedEntries(cpu_dir, "cpu");
  }
  if (online.empty()) {
    raw.cores = CoresFromCpuInfo(cpuinfo);
    return raw;
  }
  const OnlineReader reader{online};
  auto read_list = [&](const std::string& path, std::vector<int>* out) { return reader.List(path, out); };
  auto read_int = [&](const std::string& path, int* out) { return OnlineReader::Int(path, out); };

  struct CpuIds {
    int package = 0, core = -1;
    std::vector<int> siblings;
  };
  std::map<int, CpuIds> ids;
  for (int cpu : online) {
    std::string dir = cpu_dir + "/cpu" + std::to_string(cpu);
    CpuIds& id = ids[cpu];
    Status s = read_int(dir + "/topology/physical_package_id", &id.package);
    if (s.ok()) s = read_int(dir + "/topology/core_id", &id.core);
    if (s.ok()) s = read_list(dir + "/topology/thread_siblings_list", &id.siblings);
    if (!s.ok()) return s.error();
    id.package = std::max(id.package, 0);  // old ARM kernels report -1
    if (s = reader.Caches(dir, cpu, &raw.caches); !s.ok()) return s.error();
  }
  // A core is its set of SMT siblings; without that file, the CPUs sharing a
  // (package, core_id) pair.
  std::map<std::vector<int>, Core> cores;
  for (auto& [cpu, id] : ids) {
    std::vector<int> siblings = id.siblings;
    for (auto& [other, o] : ids) {
      bool twin = id.core >= 0 && o.package == id.package && o.core == id.core;
      if (id.siblings.empty() && (other == cpu || twin)) siblings.push_back(other);
    }
    cores[siblings] = Core{0, id.package, 0, siblings};
  }
  for (auto& [key, core] : cores) raw.cores.push_back(core);

  std::string node_dir = RootedPath(root, "/sys/devices/system/node");
  for (int id : NumberedEntries(node_dir, "node")) {
    std::string dir = node_dir + "/node" + std::to_string(id);
    NumaNode node{id, {}, 0};
    if (Status s = read_list(dir + "/cpulist", &node.cpus); !s.ok()) return s.error();
    // Lines read "Node 0 MemTotal:  65536000 kB".
    size_t at = ReadTrimmed(dir + "/meminfo", &text) ? text.find("MemTotal:") : std::string::npos;
    if (at != std::string::npos) {
      Result<MemInfo> m = ParseMemInfo(text.substr(at, text.find('\n', at) - at));
      if (m.ok()) node.memory_bytes = m->total_bytes;
    }
    raw.numa_nodes.push_back(std::move(node));
  }
  return raw;
}

// Groups cache instances by (level, type, size), in the order L1d, L1i, L2, L3.
// Instances are deduplicated by CPU set: sysfs lists a shared cache once per
// CPU that sees it. Hybrid CPUs get one entry per distinct size.
std::vector<CacheLevel> AggregateCaches(const std::vector<CacheInstance>& instances) {
  auto type_rank = [](const std::string& t) { return t == "Data" ? 0 : t == "Instruction" ? 1 : 2; };
  std::set<std::tuple<int, int, uint64_t, std::vector<int>>> unique;
  for (const CacheInstance& c : instances) {
    std::vector<int> cpus = c.cpus;
    std::sort(cpus.begin(), cpus.end());
    unique.emplace(c.level, type_rank(c.type), c.size_bytes, std::move(cpus));
  }
  std::map<std::tuple<int, int, uint64_t>, CacheLevel> groups;
  for (const auto& [level, rank, size, cpus] : unique) {
    CacheLevel& g = groups[{level, rank, size}];
    g.level = level;
    g.type = rank == 0 ? "Data" : rank == 1 ? "Instruction" : "Unified";
    g.size_bytes = size;
    g.instances++;
    g.shared_by_cpus = std::max<int>(g.shared_by_cpus, cpus.size());
  }
  std::vector<CacheLevel> out;
  for (auto& [key, g] : groups) out.push_back(g);
  return out;
}

// Derives the MachineInfo topology fields the same way for both sources.
void AssembleTopology(RawTopology raw, MachineInfo* info) {
  info->caches = AggregateCaches(raw.caches);
  info->cores = std::move(raw.cores);
  info->numa_nodes = std::move(raw.numa_nodes);
  // Package numbers become dense ranks: sysfs ids may have gaps.
  std::set<int> package_ids;
  for (Core& c : info->cores) {
    std::sort(c.cpus.begin(), c.cpus.end());
    package_ids.insert(c.package);
  }
  std::vector<int> ids(package_ids.begin(), package_ids.end());
  for (Core& c : info->cores) c.package = std::lower_bound(ids.begin(), ids.end(), c.package) - ids.begin();
  std::sort(info->cores.begin(), info->cores.end(), [](const Core& a, const Core& b) {
    return std::tie(a.package, a.cpus[0]) < std::tie(b.package, b.cpus[0]);
  });

  std::vector<int> all_cpus;
  info->smt_per_core = 1;
  for (size_t i = 0; i < info->cores.size(); ++i) {
    Core& c = info->cores[i];
    c.id = static_cast<int>(i);
    all_cpus.insert(all_cpus.end(), c.cpus.begin(), c.cpus.end());
    info->smt_per_core = std::max<int>(info->smt_per_core, c.cpus.size());
  }
  std::sort(all_cpus.begin(), all_cpus.end());
  if (info->numa_nodes.empty()) info->numa_nodes.push_back({0, all_cpus, info->mem_total_bytes});
  std::sort(info->numa_nodes.begin(), info->numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  for (Core& c : info->cores) {
    c.numa_node = info->numa_nodes.front().id;
    for (const NumaNode& n : info->numa_nodes) {
      if (std::binary_search(n.cpus.begin(), n.cpus.end(), c.cpus[0])) c.numa_node = n.id;
    }
  }
  info->packages = std::max<int>(1, ids.size());
  info->physical_cores = static_cast<int>(info->cores.size());
  info->logical_cpus = static_cast<int>(all_cpus.size());
}

// One thread per usable physical core, each pinned to a distinct core while
// there are any, on a buffer well beyond the last-level cache.
BandwidthOptions PlanBandwidth(const MachineInfo& info, const ProbeOptions& options) {
  BandwidthOptions plan;
  plan.threads = options.bandwidth_threads > 0 ? options.bandwidth_threads
                                               : std::min(info.physical_cores, info.usable_cpus());
  plan.threads = std::max(plan.threads, 1);
  plan.seconds = options.bandwidth_seconds;
  const std::vector<int>& allowed = info.cgroup.allowed_cpus;
  auto usable = [&](int cpu) {
    return allowed.empty() || std::binary_search(allowed.begin(), allowed.end(), cpu);
  };
  for (const Core& c : info.cores) {
    if (usable(c.cpus[0])) plan.pin_cpus.push_back(c.cpus[0]);
  }
  for (const Core& c : info.cores) {  // then SMT siblings, if asked for more threads
    for (size_t i = 1; i < c.cpus.size(); ++i) {
      if (usable(c.cpus[i])) plan.pin_cpus.push_back(c.cpus[i]);
    }
  }
  uint64_t l3_total = 0;
  for (const CacheLevel& c : info.caches) {
    if (c.level >= 3) l3_total += c.size_bytes * c.instances;
  }
  // 4x the L3 keeps caches from flattering the result; the per-thread cap
  // bounds the time spent faulting the buffer in; a quarter of the free
  // memory keeps the probe from pushing anything into swap.
  const uint64_t mib = 1ull << 20;
  plan.buffer_bytes = std::max<uint64_t>(256 * mib, 4 * l3_total);
  plan.buffer_bytes = std::min<uint64_t>(plan.buffer_bytes, 256 * mib * plan.threads);
  plan.buffer_bytes = std::min<uint64_t>(plan.buffer_bytes, info.usable_memory_bytes() / 4);
  return plan;
}

}  // namespace

uint64_t MachineInfo::usable_memory_bytes() const {
  uint64_t usable = mem_available_bytes;
  if (cgroup.memory_limit_bytes > 0) {
    uint64_t room = cgroup.memory_limit_bytes > cgroup.memory_usage_bytes
                        ? cgroup.memory_limit_bytes - cgroup.memory_usage_bytes
                        : 0;
    usable = usable > 0 ? std::min(usable, room) : room;
  }
  return usable;
}

int MachineInfo::usable_cpus() const {
  int n = logical_cpus > 0 ? logical_cpus : std::numeric_limits<int>::max();
  if (!cgroup.allowed_cpus.empty()) n = std::min<int>(n, cgroup.allowed_cpus.size());
  // The epsilon keeps 2.0000000001 (float noise) from counting as 3 CPUs.
  if (cgroup.cpu_quota > 0) n = std::min<int>(n, std::ceil(cgroup.cpu_quota - 1e-6));
  return n == std::numeric_limits<int>::max() ? 1 : std::max(n, 1);
}

bool MachineInfo::has_isa(const std::string& name) const {
  return std::any_of(isa.begin(), isa.end(),
                     [&](const std::string& i) { return strcasecmp(i.c_str(), name.c_str()) == 0; });
}

namespace {

// On ARM the kernel's HWCAP bits, not /proc/cpuinfo, say what this process may
// use (see hw/arm_cpu.h); cpuinfo's name stays when it has one.
void UseLiveArmFeatures(MachineInfo* info) {
  std::optional<LiveArmCpu> arm = ReadLiveArmCpu();
  if (!arm) return;
  const bool cpuinfo_is_arm = !info->isa.empty() && info->isa.front() == "NEON";
  info->isa = arm->isa;
  if (!cpuinfo_is_arm || info->cpu_model == "unknown") {
    info->cpu_model = arm->model.empty() ? "unknown ARM CPU" : arm->model;
  }
}

}  // namespace

Result<MachineInfo> Probe(const ProbeOptions& options) {
  const std::string root = options.fs_root.empty() ? "/" : options.fs_root;
  const bool live = RootedPath(root, "/") == "/";
  Result<CpuInfo> cpu = ReadCpuInfo(root);
  if (!cpu.ok()) return cpu.error();
  Result<MemInfo> mem = ReadMemInfo(root);
  if (!mem.ok()) return mem.error();

  MachineInfo info;
  info.cpu_model = cpu->model;
  info.arch = cpu->arch;
  info.isa = cpu->isa;
  info.mem_total_bytes = mem->total_bytes;
  info.mem_available_bytes = mem->available_bytes;
  struct utsname uts;
  if (live && uname(&uts) == 0) info.arch = uts.machine;
  if (live) UseLiveArmFeatures(&info);

  Result<RawTopology> topo = live ? HwlocTopology() : MakeError(ErrorCode::kUnsupported, "fixture root");
  if (!topo.ok()) topo = SysfsTopology(root, *cpu);
  if (!topo.ok()) return topo.error();
  info.core_kinds = std::move(topo->kinds);
  AssembleTopology(std::move(*topo), &info);
  if (!info.core_kinds.empty()) {
    info.core_kinds_source = "hwloc cpukinds";
  } else {
    std::vector<int> cpus;
    for (const Core& c : info.cores) cpus.insert(cpus.end(), c.cpus.begin(), c.cpus.end());
    std::sort(cpus.begin(), cpus.end());
    info.core_kinds = SysfsCoreKinds(root, cpus, &info.core_kinds_source);
  }

  Result<CgroupLimits> cgroup = ReadCgroupLimits(root);
  if (!cgroup.ok()) return cgroup.error();
  info.cgroup = std::move(*cgroup);
  cpu_set_t affinity;
  // Live, the affinity mask is the final word: it already reflects the cpuset
  // and also catches taskset/numactl restrictions.
  if (live && sched_getaffinity(0, sizeof(affinity), &affinity) == 0) {
    info.cgroup.allowed_cpus.clear();
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &affinity)) info.cgroup.allowed_cpus.push_back(c);
    }
  }

  // A fixture tree describes some other machine: measuring this one's memory
  // would attach a meaningless number to it.
  if (options.measure_bandwidth && live) {
    Result<Bandwidth> bw = MeasureReadBandwidth(PlanBandwidth(info, options));
    if (!bw.ok()) return bw.error();
    info.bandwidth = *bw;
  }
  return info;
}

std::string Fingerprint(const MachineInfo& info) {
  std::ostringstream key;
  key << info.cpu_model << '|' << info.arch << '|' << info.physical_cores << '|' << info.logical_cpus;
  for (const CacheLevel& c : info.caches)
    key << "|L" << c.level << c.type << c.size_bytes << 'x' << c.instances;
  // Rounded to the nearest GiB: the kernel's reservations move MemTotal a little between boots.
  key << '|' << (info.mem_total_bytes + (1ull << 29)) / (1ull << 30) << "GiB";
  for (const std::string& isa : info.isa) key << '|' << isa;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char ch : key.str()) hash = (hash ^ ch) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace hone::hw
