// `hone info`: what this machine offers an LLM (cores, caches, ISA, memory, bandwidth).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/amx.h"
#include "engine/backend.h"
#include "hw/probe.h"
#include "util/format.h"

namespace hone::cli {
namespace {

struct InfoArgs {
  bool json = false;
  bool no_bandwidth = false;
  double seconds = 1.0;
  std::string root;  // another machine's /proc and /sys, copied (tests, support)
};

// "0-7,12,14-15": a CPU list as the kernel writes one.
std::string CpuRanges(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

nlohmann::json ToJson(const hw::MachineInfo& m) {
  nlohmann::json j;
  j["cpu_model"] = m.cpu_model;
  j["arch"] = m.arch;
  j["packages"] = m.packages;
  j["physical_cores"] = m.physical_cores;
  j["logical_cpus"] = m.logical_cpus;
  j["smt_per_core"] = m.smt_per_core;
  j["usable_cpus"] = m.usable_cpus();
  j["isa"] = m.isa;
  j["core_kinds"] = nlohmann::json::array();
  for (const hw::CoreKind& k : m.core_kinds)
    j["core_kinds"].push_back({{"name", k.name}, {"cpus", k.cpus}, {"capacity", k.capacity}});
  j["core_kinds_source"] = m.core_kinds_source;
  for (auto& n : m.numa_nodes)
    j["numa_nodes"].push_back({{"id", n.id}, {"cpus", n.cpus}, {"memory_bytes", n.memory_bytes}});
  for (auto& c : m.caches) {
    j["caches"].push_back({{"level", c.level},
                           {"type", c.type},
                           {"size_bytes", c.size_bytes},
                           {"instances", c.instances},
                           {"shared_by_cpus", c.shared_by_cpus}});
  }
  for (auto& c : m.cores)
    j["cores"].push_back(
        {{"id", c.id}, {"package", c.package}, {"numa_node", c.numa_node}, {"cpus", c.cpus}});
  j["memory"] = {{"total_bytes", m.mem_total_bytes},
                 {"available_bytes", m.mem_available_bytes},
                 {"usable_bytes", m.usable_memory_bytes()}};
  j["cgroup"] = {{"cpu_quota", m.cgroup.cpu_quota},
                 {"memory_limit_bytes", m.cgroup.memory_limit_bytes},
                 {"memory_usage_bytes", m.cgroup.memory_usage_bytes},
                 {"allowed_cpus", m.cgroup.allowed_cpus}};
  j["bandwidth"] = {
      {"read_gbps", m.bandwidth.read_gbps},           {"read_gbps_mean", m.bandwidth.read_gbps_mean},
      {"read_gbps_ci95", m.bandwidth.read_gbps_ci95}, {"threads", m.bandwidth.threads},
      {"buffer_bytes", m.bandwidth.buffer_bytes},     {"runs", m.bandwidth.runs}};
  j["fingerprint"] = hw::Fingerprint(m);
  j["llama_cpp"] = {{"commit", engine::LlamaVersion()},
                    {"build", engine::LlamaBuildKey()},
                    {"build_isa", engine::LlamaBuildIsa()},
                    {"system_info", engine::SystemInfo()}};
  const engine::AmxStatus& amx = engine::Amx();
  j["amx"] = {{"in_use", amx.usable},         {"cpu", amx.cpu},
              {"built", amx.built},           {"granted", amx.granted},
              {"switchable", amx.switchable}, {"disabled_by_user", amx.disabled_by_user},
              {"self_test", amx.self_test},   {"reason", amx.reason}};
  return j;
}

void PrintText(const hw::MachineInfo& m) {
  std::printf("CPU         %s (%s)\n", m.cpu_model.c_str(), m.arch.c_str());
  std::printf("Cores       %d physical, %d logical (SMT %d), %d package(s), usable CPUs %d\n",
              m.physical_cores, m.logical_cpus, m.smt_per_core, m.packages, m.usable_cpus());
  if (!m.core_kinds.empty()) {
    std::string kinds;
    for (const hw::CoreKind& k : m.core_kinds)
      kinds += (kinds.empty() ? "" : "; ") + k.name + ": CPUs " + CpuRanges(k.cpus);
    std::printf("Core kinds  %s (fastest first; from %s)\n", kinds.c_str(), m.core_kinds_source.c_str());
  }
  std::printf("NUMA        %zu node(s)\n", m.numa_nodes.size());
  for (auto& c : m.caches) {
    std::printf("Cache       L%d %-11s %s x %d (shared by %d CPUs)\n", c.level, c.type.c_str(),
                FormatBytes(c.size_bytes).c_str(), c.instances, c.shared_by_cpus);
  }
  std::string isa;
  for (auto& f : m.isa) isa += (isa.empty() ? "" : " ") + f;
  std::printf("ISA         %s\n", isa.c_str());
  std::printf("Memory      %s total, %s available, %s usable\n", FormatBytes(m.mem_total_bytes).c_str(),
              FormatBytes(m.mem_available_bytes).c_str(), FormatBytes(m.usable_memory_bytes()).c_str());
  std::printf("cgroup      CPU quota %s, memory limit %s\n",
              m.cgroup.cpu_quota > 0 ? std::to_string(m.cgroup.cpu_quota).c_str() : "none",
              m.cgroup.memory_limit_bytes ? FormatBytes(m.cgroup.memory_limit_bytes).c_str() : "none");
  if (m.bandwidth.runs > 0) {
    std::printf("Bandwidth   %.1f GB/s read (best of %d; mean %.1f ± %.1f, %d threads, %s buffer)\n",
                m.bandwidth.read_gbps, m.bandwidth.runs, m.bandwidth.read_gbps_mean,
                m.bandwidth.read_gbps_ci95, m.bandwidth.threads,
                FormatBytes(m.bandwidth.buffer_bytes).c_str());
  } else {
    std::printf("Bandwidth   not measured\n");
  }
  std::printf("Fingerprint %s\n", hw::Fingerprint(m).c_str());
  std::string build = engine::LlamaBuildKey();
  std::printf("llama.cpp   %s%s\n", engine::LlamaVersion().c_str(),
              build.empty() ? "" : (" (" + build + ")").c_str());
  std::printf("AMX         %s\n", engine::Amx().reason.c_str());
}

}  // namespace

namespace {

Runner AddInfoCommand(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd =
      app.add_subcommand("info", "Probe this machine: cores, SMT, caches, NUMA, ISA, memory, bandwidth");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_flag("--no-bandwidth", args->no_bandwidth, "Skip the memory bandwidth measurement");
  cmd->add_option("--bandwidth-seconds", args->seconds, "Time spent measuring bandwidth")
      ->check(CLI::Range(0.05, 60.0));
  cmd->add_option(
      "--root", args->root,
      "Read /proc and /sys under this folder instead (a copy from another machine; no bandwidth)");
  return [args]() {
    hw::ProbeOptions opt;
    opt.measure_bandwidth = !args->no_bandwidth;
    opt.bandwidth_seconds = args->seconds;
    if (!args->root.empty()) opt.fs_root = args->root;
    auto m = hw::Probe(opt);
    if (!m) return Fail(m.error().ToString());
    if (args->json)
      std::printf("%s\n", ToJson(*m).dump(2).c_str());
    else
      PrintText(*m);
    return 0;
  };
}

const CommandRegistrar kRegistrar(10, &AddInfoCommand);

}  // namespace

}  // namespace hone::cli
