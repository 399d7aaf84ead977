#include "tune/config.h"

#include <cctype>
#include <sstream>

namespace hone::tune {

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kChat:
      return "chat";
    case Workload::kBatch:
      return "batch";
    case Workload::kServer:
      return "server";
  }
  return "?";
}

Result<Workload> ParseWorkload(const std::string& name) {
  if (name == "chat") return Workload::kChat;
  if (name == "batch") return Workload::kBatch;
  if (name == "server") return Workload::kServer;
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown workload '" + name + "' (expected chat, batch or server)");
}

std::string Config::Key() const {
  std::ostringstream s;
  s << "t=" << threads << " tb=" << threads_batch << " cpus=" << placement << (strict_cpu ? " strict" : "")
    << (cpus_batch.empty() ? "" : " cpusb=" + placement_batch) << " poll=" << poll << " b=" << n_batch
    << " ub=" << n_ubatch << " fa=" << engine::FlashAttnName(flash_attn) << " kv=" << kv_type << ' '
    << engine::LoadModeName(load_mode) << (repack ? " repack" : " no-repack");
  if (repack && !amx) s << " no-amx";
  if (n_parallel > 1) s << " np=" << n_parallel;
  return s.str();
}

engine::LoadOptions Config::ToLoadOptions() const {
  engine::LoadOptions o;
  o.mode = load_mode;
  o.repack = repack;
  o.amx = amx;
  return o;
}

engine::SessionOptions Config::ToSessionOptions(uint32_t n_ctx) const {
  engine::SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_seq_max = static_cast<uint32_t>(std::max(1, n_parallel));
  o.kv_type_k = o.kv_type_v = kv_type;
  o.n_batch = static_cast<uint32_t>(n_batch);
  o.n_ubatch = static_cast<uint32_t>(n_ubatch);
  o.threads = threads;
  o.threads_batch = threads_batch;
  o.flash_attn = flash_attn;
  o.cpus = cpus;
  o.cpus_batch = cpus_batch;
  o.strict_cpu = strict_cpu;
  o.poll = poll;
  return o;
}

Config DefaultConfig(int physical_cores, int n_parallel) {
  Config c;
  c.threads = c.threads_batch = std::max(1, physical_cores);
  c.n_parallel = std::max(1, n_parallel);
  return c;
}

}  // namespace hone::tune
