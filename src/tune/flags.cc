#include "tune/flags.h"

#include <algorithm>
#include <sstream>

namespace hone::tune {

std::string CpuMaskHex(const std::vector<int>& cpus) {
  if (cpus.empty()) return "";
  int top = *std::max_element(cpus.begin(), cpus.end());
  std::vector<int> nibbles(top / 4 + 1, 0);
  for (int c : cpus) {
    if (c >= 0) nibbles[c / 4] |= 1 << (c % 4);
  }
  std::string hex = "0x";
  for (auto it = nibbles.rbegin(); it != nibbles.rend(); ++it) hex += "0123456789abcdef"[*it];
  return hex;
}

std::string LlamaFlags(const Config& c, LlamaTool tool, int n_ctx) {
  std::ostringstream f;
  f << "-t " << c.threads << " -tb " << c.threads_batch;
  if (!c.cpus.empty()) {
    // llama.cpp takes decode's mask from -C and prefill's from -Cb; decode
    // uses the set's first `threads` CPUs, prefill its own set where it has one.
    std::vector<int> decode(c.cpus.begin(), c.cpus.begin() + std::min<size_t>(c.cpus.size(), c.threads));
    f << " -C " << CpuMaskHex(decode) << " -Cb " << CpuMaskHex(c.cpus_batch.empty() ? c.cpus : c.cpus_batch);
    if (c.strict_cpu) f << " --cpu-strict 1 --cpu-strict-batch 1";
    // The NUMA strategy that matches the placement on multi-node machines.
    if (c.placement == "interleave") f << " --numa distribute";
    if (c.placement.rfind("node", 0) == 0) f << " --numa isolate";
  } else if (!c.cpus_batch.empty()) {
    f << " -Cb " << CpuMaskHex(c.cpus_batch);  // prefill pinned, decode left to the OS
  }
  if (c.poll != 50) f << " --poll " << c.poll;  // --poll-batch defaults to --poll
  if (n_ctx > 0) f << " -c " << n_ctx;
  if (c.n_batch != 2048) f << " -b " << c.n_batch;
  if (c.n_ubatch != 512) f << " -ub " << c.n_ubatch;
  // hone's auto is off where the V cache is f16 (engine/session.cc); llama.cpp's is on.
  const bool quantized_v = c.kv_type != "f16" && c.kv_type != "f32" && c.kv_type != "bf16";
  if (c.flash_attn != engine::FlashAttn::kAuto) f << " -fa " << engine::FlashAttnName(c.flash_attn);
  if (c.flash_attn == engine::FlashAttn::kAuto && !quantized_v) f << " -fa off";
  if (c.kv_type != "f16") f << " -ctk " << c.kv_type << " -ctv " << c.kv_type;
  switch (c.load_mode) {
    case engine::LoadMode::kMmap:
      break;
    case engine::LoadMode::kNoMmap:
      f << " --no-mmap";
      break;
    case engine::LoadMode::kMlock:
      f << " --no-mmap --mlock";
      break;
    case engine::LoadMode::kMmapMlock:
      f << " --mlock";
      break;
  }
  // llama.cpp has no flag that turns AMX off alone; -nr (no extra buffer
  // types) is the nearest, and hone's profile note says so.
  if (!c.repack || !c.amx) f << " -nr";
  if (tool == LlamaTool::kServer && c.n_parallel > 1) f << " -np " << c.n_parallel;
  return f.str();
}

}  // namespace hone::tune
