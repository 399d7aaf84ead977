#include "tune/plan.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include "engine/amx.h"
#include "engine/backend.h"
#include "engine/memory_estimate.h"
#include "util/format.h"
#include "util/units.h"

namespace hone::tune {
namespace {

Error Usage(const std::string& message) { return MakeError(ErrorCode::kInvalidArgument, message); }

bool MlockAllowed(uint64_t bytes) {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0) return false;
  return r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= bytes;
}

// The workload's shape; n_ctx is just enough for it unless --ctx says more.
Result<WorkloadSpec> SpecFor(const TuneRequest& r) {
  auto w = ParseWorkload(r.workload);
  if (!w) return Usage(w.error().message);
  if (r.prompt_tokens < 1 || r.gen_tokens < 2 || r.concurrency < 1 || r.ctx < 0)
    return Usage("--prompt-tokens must be >= 1, --gen-tokens >= 2, --concurrency >= 1 and --ctx >= 0");
  WorkloadSpec s;
  s.workload = *w;
  s.prompt_tokens = r.prompt_tokens;
  s.gen_tokens = r.gen_tokens;
  s.concurrency = *w == Workload::kChat ? 1 : r.concurrency;
  s.min_stream_tps = r.min_stream_tps;
  const int need = s.concurrency * (r.prompt_tokens + r.gen_tokens + 8);
  s.n_ctx = r.ctx > 0 ? r.ctx : (need + 255) / 256 * 256;
  if (static_cast<int>(s.n_ctx) < need) {
    return Usage("--ctx " + std::to_string(r.ctx) + " cannot hold " + std::to_string(s.concurrency) + " x (" +
                 std::to_string(r.prompt_tokens) + " prompt + " + std::to_string(r.gen_tokens) +
                 " generated) tokens");
  }
  return s;
}

}  // namespace

double EstimateTrialSeconds(const Plan& p) {
  const double params = static_cast<double>(p.gguf.n_params());
  const double cores = std::max(1, p.machine.physical_cores);
  const double seqs = p.spec.workload == Workload::kChat ? 1 : p.spec.concurrency;
  const double prefill = 2 * params * p.spec.prompt_tokens * seqs / (50e9 * cores);
  const double gbps = p.machine.bandwidth.read_gbps > 0 ? p.machine.bandwidth.read_gbps : 10;
  const double decode = p.spec.gen_tokens * static_cast<double>(p.gguf.tensor_bytes()) / (gbps * 1e9);
  const double load = static_cast<double>(p.gguf.file_bytes) / 2e9;
  // Each repetition lasts at least min_rep_seconds (tiny models repeat the workload).
  return load + 3 * std::max(prefill + decode, p.spec.min_rep_seconds);
}

Result<Plan> MakePlan(const TuneRequest& r, const std::function<void(const std::string&)>& say) {
  auto spec = SpecFor(r);
  if (!spec) return spec.error();
  auto budget = ParseDuration(r.budget);
  if (!budget) return Usage("--budget: " + budget.error().message);
  if (*budget <= 0) return Usage("--budget: '" + r.budget + "' must be more than 0 (e.g. 90s, 5m)");
  auto g = engine::ReadGguf(r.model);
  if (!g) return g.error();
  if (g->architecture.empty())
    return MakeError(ErrorCode::kCorrupt, r.model + ": GGUF has no general.architecture key");
  Plan p;
  p.gguf = *g;
  p.budget_s = *budget;
  p.spec = *spec;
  if (say) say("probing the machine (memory bandwidth takes about a second)");
  auto m = hw::Probe();
  if (!m) return m.error();
  p.machine = *m;
  WorkloadSpec& s = p.spec;
  s.memory_budget = m->usable_memory_bytes();
  // The largest micro-batch the search may try sizes the compute buffer.
  engine::MemoryRequest req{s.n_ctx, 1024, static_cast<uint32_t>(s.concurrency), "f16", false};
  if (auto est = engine::EstimateMemory(*g, req);
      est && s.memory_budget > 0 && est->total() > s.memory_budget) {
    return MakeError(ErrorCode::kOutOfMemory,
                     "a context of " + std::to_string(s.n_ctx) + " tokens needs about " +
                         FormatBytes(est->total()) + " with the weights, but only " +
                         FormatBytes(s.memory_budget) + " is available; use a smaller --ctx");
  }
  const double one = EstimateTrialSeconds(p);
  if (!r.exhaustive && p.budget_s < one) {
    char msg[256];
    std::snprintf(msg, sizeof(msg),
                  "--budget %s (%.0f s) is too small for even one trial (about %.1f s here)",
                  r.budget.c_str(), p.budget_s, one);
    return Usage(msg);
  }
  return p;
}

SpaceRequest SpaceRequestFor(const Plan& p) {
  SpaceRequest sr;
  sr.workload = p.spec.workload;
  sr.prompt_tokens = p.spec.prompt_tokens;
  sr.concurrency = p.spec.concurrency;
  sr.model_bytes = p.gguf.file_bytes;
  sr.mlock_allowed = MlockAllowed(p.gguf.file_bytes);
  sr.poll_applies = !engine::UsesOpenMp();
  sr.amx_usable = engine::Amx().usable;
  return sr;
}

}  // namespace hone::tune
