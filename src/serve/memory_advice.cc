#include "serve/memory_advice.h"

#include <cctype>

#include "engine/gguf_file.h"

namespace hone::serve {

engine::MemoryRequest MemoryRequestFor(const SchedulerOptions& s) {
  engine::MemoryRequest req;
  req.n_ctx = static_cast<uint32_t>((s.ctx_per_slot + 255) / 256 * 256 * s.slots);
  req.n_ubatch = static_cast<uint32_t>(s.batch);
  req.n_seq = static_cast<uint32_t>(s.slots);
  req.kv_type = s.tuned ? s.tuned->kv_type_k : s.kv_type;
  req.flash_attn = (s.tuned ? s.tuned->flash_attn : s.flash_attn) == engine::FlashAttn::kOn;
  return req;
}

std::string FitAdvice(const RegistryEntry& e, const SchedulerOptions& s, uint64_t have, uint64_t need) {
  auto gguf = engine::ReadGguf(e.path);
  if (!gguf) return "";
  auto est = engine::EstimateMemory(*gguf, MemoryRequestFor(s));
  if (!est) return "";
  // What `need` holds beyond this model (its draft model) stays as it is.
  const uint64_t beside = need > est->total() ? need - est->total() : 0;
  engine::QuantFit fit = engine::LargestQuantThatFits(*gguf, *est, have > beside ? have - beside : 0);
  std::string non_weights = std::to_string(fit.non_weights >> 20) + " MiB for " + std::to_string(s.slots) +
                            " slot(s) x " + std::to_string(s.ctx_per_slot) + " tokens of context";
  if (beside > 0) non_weights += ", beside " + std::to_string(beside >> 20) + " MiB for its draft model";
  if (!fit.type.empty()) {
    std::string lower = fit.type;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ". A " + fit.type + " of it would need about " + std::to_string(fit.total >> 20) +
           " MiB and fit (hone quantize <model.gguf> --types " + lower + "; that includes " + non_weights +
           ")";
  }
  return ". No smaller quantization of it would fit" +
         (fit.total ? " (Q2_K would need about " + std::to_string(fit.total >> 20) + " MiB)"
                    : std::string()) +
         "; its KV cache and buffers take " + non_weights + ": fewer --slots or a smaller --ctx free some";
}

}  // namespace hone::serve
