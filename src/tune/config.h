// One point in the tuner's search space: every llama.cpp run parameter that
// changes speed (and, for the KV type, quality). Plain data, cheap to copy.
#pragma once

#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"

namespace hone::tune {

enum class Workload { kChat, kBatch, kServer };
const char* WorkloadName(Workload w);
Result<Workload> ParseWorkload(const std::string& name);

struct Config {
  int threads = 0;        // decode threads
  int threads_batch = 0;  // prefill threads
  // CPU placement. "none" lets the OS schedule; otherwise a named CPU set from
  // the search space ("physical", "smt", "node0", ...) with its CPU ids.
  std::string placement = "none";
  std::vector<int> cpus;
  // Prefill's own named CPU set where it differs from decode's (searched on
  // machines with two kinds of cores); empty: prefill uses `cpus` too.
  std::string placement_batch;
  std::vector<int> cpus_batch;
  bool strict_cpu = false;
  int poll = 50;
  int n_batch = 2048;
  int n_ubatch = 512;
  engine::FlashAttn flash_attn = engine::FlashAttn::kAuto;
  std::string kv_type = "f16";
  engine::LoadMode load_mode = engine::LoadMode::kMmap;
  bool repack = true;
  bool amx = true;     // with repack: Intel AMX kernels where the CPU has them (engine/amx.h)
  int n_parallel = 1;  // server slots (sequences); chat uses 1

  // A short unique text form, e.g. "t=4 tb=8 cpus=physical strict poll=50 b=2048 ub=512 fa=auto kv=f16 mmap
  // repack" (with " cpusb=<set>" where prefill has its own CPU set).
  std::string Key() const;
  bool operator==(const Config& o) const { return Key() == o.Key(); }
  // What changes needs a reloaded Model rather than just a new Session.
  bool SameModel(const Config& o) const {
    return load_mode == o.load_mode && repack == o.repack && amx == o.amx;
  }

  engine::LoadOptions ToLoadOptions() const;
  // n_ctx: KV cells for all sequences together.
  engine::SessionOptions ToSessionOptions(uint32_t n_ctx) const;
};

// llama.cpp's own defaults (what llama-cli/llama-server use without flags):
// threads = physical cores for both phases, no pinning, poll 50, batch 2048,
// ubatch 512, flash attention auto, f16 KV, mmap, repacking on.
Config DefaultConfig(int physical_cores, int n_parallel = 1);

}  // namespace hone::tune
