// How a model's session is laid out for serving: one KV stream for all
// slots or one each, and the attention kernel (see scheduler.h).
#include "serve/scheduler.h"

namespace hone::serve {

// ggml's CPU flash attention is slower than plain attention wherever a
// decode step runs: one token at some depth, and verification batches of
// 2-63 tokens (its tiled kernel needs 64 query rows, GGML_FA_TILE_Q). On the
// pinned tree (llama-bench, 2-core Xeon, synthetic Qwen2.5-0.5B Q4_K_M):
// decode at depth 1024 10.4 tok/s with it, 17.2 without; 16 tokens at depth
// 512 37 vs 109 tok/s; only a 512-token prefill gains (115 vs 107). So a
// server leaves it off unless asked (--flash-attn on, or a tuned profile's
// choice), and a model decodes with the same kernels with --spec and without.
engine::FlashAttn FlashAttnFor(const SchedulerOptions& opt) {
  const engine::FlashAttn fa = opt.tuned ? opt.tuned->flash_attn : opt.flash_attn;
  return fa == engine::FlashAttn::kAuto ? engine::FlashAttn::kOff : fa;
}

bool UsesSharedKv(const SchedulerOptions& opt) {
  if (opt.slots <= 1 || opt.kv_unified == KvUnified::kOff) return false;
  return opt.kv_unified == KvUnified::kOn;
}

}  // namespace hone::serve
