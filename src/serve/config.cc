#include "serve/config.h"

#include <cstdlib>
#include <filesystem>

#include "hw/probe.h"
#include "util/units.h"

namespace hone::serve {

namespace {

// Speculative decoding: which drafter, which draft model, how far it drafts.
std::vector<Setting<ServeConfig>> SpecSettings() {
  return {
      {"spec",
       "Speculative decoding: auto (the tuned profile's choice, else none), none, an n-gram drafter "
       "(ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod), draft-simple (with --draft) or a list; "
       "the output is unchanged, only faster where drafts are right",
       [](ServeConfig& c, const std::string& v) { return c.spec = v, Status::Ok(); }},
      {"draft", "A draft model (GGUF file with the target's vocabulary) for speculative decoding",
       [](ServeConfig& c, const std::string& v) { return c.draft = v, Status::Ok(); }},
      {"spec-max",
       "Most tokens a slot drafts per step with --spec (64; it adapts below this to its acceptance and cost)",
       [](ServeConfig& c, const std::string& v) { return SetInt("spec-max", v, &c.spec_max, 1); }},
      {"spec-ngram", "Tokens the n-gram lookup of --spec matches (0 = llama.cpp's default, 12)",
       [](ServeConfig& c, const std::string& v) { return SetInt("spec-ngram", v, &c.spec_ngram, 0); }},
      {"spec-min-gain",
       "With --spec, drafting pauses when it measures below this share of plain decoding's tokens/s "
       "(0.97; 0 = always draft)",
       [](ServeConfig& c, const std::string& v) {
         return SetFraction("spec-min-gain", v, &c.spec_min_gain);
       }},
  };
}

// The prompt cache's tiers beyond the slots.
std::vector<Setting<ServeConfig>> CacheSettings() {
  return {
      {"cache-ram",
       "Prompt cache in RAM per loaded model: a size (4G), 0 for off, or auto (a quarter of free memory, at "
       "most 8G)",
       [](ServeConfig& c, const std::string& v) { return c.cache_ram = v, Status::Ok(); }},
      {"cache-disk",
       "Prompt cache on disk per loaded model, kept across restarts: a size, 0 for off, or auto (a tenth of "
       "the "
       "free disk, at most 16G)",
       [](ServeConfig& c, const std::string& v) { return c.cache_disk = v, Status::Ok(); }},
      {"cache-dir", "Folder of the prompt cache's disk tier (default <state-dir>/prompt-cache)",
       [](ServeConfig& c, const std::string& v) { return c.cache_dir = v, Status::Ok(); }},
  };
}

std::vector<Setting<ServeConfig>> ServingSettings() {
  return {
      {"models", "Folder of .gguf models to serve (name = file stem)",
       [](ServeConfig& c, const std::string& v) { return c.models_dir = v, Status::Ok(); }},
      {"slots", "Parallel sequences per model (default: a tuned profile's, else 4)",
       [](ServeConfig& c, const std::string& v) {
         c.slots_set = true;
         return SetInt("slots", v, &c.slots, 1);
       }},
      {"profiles", "Apply tuned profiles from `hone tune` (true/false)",
       [](ServeConfig& c, const std::string& v) { return SetBool("profiles", v, &c.profiles); }},
      {"ctx", "Context (tokens) per slot",
       [](ServeConfig& c, const std::string& v) { return SetInt("ctx", v, &c.ctx, 16); }},
      {"batch", "Most tokens per decode step",
       [](ServeConfig& c, const std::string& v) { return SetInt("batch", v, &c.batch, 1); }},
      {"prefill-chunk", "Most prompt tokens per step while other streams run",
       [](ServeConfig& c, const std::string& v) { return SetInt("prefill-chunk", v, &c.prefill_chunk, 1); }},
      {"max-queue", "Waiting requests per model before 429/503",
       [](ServeConfig& c, const std::string& v) { return SetInt("max-queue", v, &c.max_queue, 0); }},
      {"inference-nice",
       "Niceness of the decode threads (0-19; 0 = as the server): requests, refusals and /health preempt "
       "inference",
       [](ServeConfig& c, const std::string& v) {
         Status st = SetInt("inference-nice", v, &c.inference_nice, 0);
         if (st && c.inference_nice > 19)
           return Status(MakeError(ErrorCode::kInvalidArgument, "inference-nice must be 0..19"));
         return st;
       }},
      {"threads", "Threads (0 = physical cores)",
       [](ServeConfig& c, const std::string& v) { return SetInt("threads", v, &c.threads, 0); }},
      {"flash-attn", "auto, on or off (auto: off, faster for decoding on CPUs, unless the V cache is quantized)",
       [](ServeConfig& c, const std::string& v) { return c.flash_attn = v, Status::Ok(); }},
      {"kv-type", "KV cache type (f16, q8_0, ...)",
       [](ServeConfig& c, const std::string& v) { return c.kv_type = v, Status::Ok(); }},
      {"kv-unified", "auto, on or off: all slots in one KV stream (auto: one per slot)",
       [](ServeConfig& c, const std::string& v) {
         if (v != "auto" && v != "on" && v != "off")
           return Status(
               MakeError(ErrorCode::kInvalidArgument, "kv-unified must be auto, on or off, not " + v));
         return c.kv_unified = v, Status::Ok();
       }},
      {"load-mode", "mmap, no-mmap, mlock",
       [](ServeConfig& c, const std::string& v) { return c.load_mode = v, Status::Ok(); }},
      {"keep-alive", "Idle time before a model unloads (5m, 30s, 0, -1 = forever)",
       [](ServeConfig& c, const std::string& v) { return c.keep_alive = v, Status::Ok(); }},
      {"memory-limit", "Memory models may use (e.g. 8G; default: free memory, cgroup aware)",
       [](ServeConfig& c, const std::string& v) { return c.memory_limit = v, Status::Ok(); }},
      {"request-timeout", "Seconds a request may run",
       [](ServeConfig& c, const std::string& v) {
         int s = 0;
         Status st = SetInt("request-timeout", v, &s, 1);
         if (st) c.request_timeout = s;
         return st;
       }},
      {"pin", "Comma-separated models never evicted",
       [](ServeConfig& c, const std::string& v) { return c.pinned = SplitComma(v), Status::Ok(); }},
      {"state-dir", "Folder for the spend ledger (default ~/.local/state/hone)",
       [](ServeConfig& c, const std::string& v) { return c.state_dir = v, Status::Ok(); }},
  };
}

}  // namespace

const std::vector<Setting<ServeConfig>>& Settings() {
  static const std::vector<Setting<ServeConfig>> kSettings = [] {
    std::vector<Setting<ServeConfig>> all = ServingSettings();
    for (auto group : {SpecSettings(), CacheSettings()}) all.insert(all.end(), group.begin(), group.end());
    return all;
  }();
  return kSettings;
}

std::string DefaultStateDir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/hone";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/hone";
}

}  // namespace hone::serve

namespace hone::serve {

Result<PromptCacheBudget> ResolvePromptCacheBudget(const ServeConfig& c) {
  PromptCacheBudget b;
  b.dir = !c.cache_dir.empty()  ? c.cache_dir
          : c.state_dir.empty() ? DefaultStateDir() + "/prompt-cache"
                                : c.state_dir + "/prompt-cache";
  constexpr uint64_t kGiB = 1ull << 30;
  if (c.cache_ram == "auto") {
    // A quarter of what is free beside the models at start: the models and
    // their slots come first, and the cache only saves prefill time. A
    // --memory-limit below that (a small board's budget) bounds it too.
    hw::ProbeOptions po;
    po.measure_bandwidth = false;
    auto m = hw::Probe(po);
    uint64_t base = m ? m->usable_memory_bytes() : 0;
    if (auto limit = ParseSize(c.memory_limit); !c.memory_limit.empty() && limit && *limit > 0)
      base = std::min(base, *limit);
    b.ram_bytes = std::min<uint64_t>(8 * kGiB, base / 4);
  } else {
    auto v = ParseSize(c.cache_ram);
    if (!v) return MakeError(ErrorCode::kInvalidArgument, "cache-ram: " + v.error().message);
    b.ram_bytes = *v;
  }
  if (c.cache_disk == "auto") {
    std::error_code ec;
    std::filesystem::path probe = b.dir;
    while (!probe.empty() && !std::filesystem::exists(probe, ec)) probe = probe.parent_path();
    const auto space = std::filesystem::space(probe.empty() ? "." : probe, ec);
    b.disk_bytes = ec ? 0 : std::min<uint64_t>(16 * kGiB, space.available / 10);
  } else {
    auto v = ParseSize(c.cache_disk);
    if (!v) return MakeError(ErrorCode::kInvalidArgument, "cache-disk: " + v.error().message);
    b.disk_bytes = *v;
  }
  return b;
}

}  // namespace hone::serve
