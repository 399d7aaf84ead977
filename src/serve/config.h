// `hone serve`'s engine settings: models, slots, contexts, speculation,
// memory and the prompt cache. Each one can come from the TOML config file,
// an environment variable (HONE_<NAME>), or a flag (--<name>), later sources
// winning in that order; the table in config.cc lists them once for all
// three. The HTTP edge's settings are api::HttpConfig; api::ServeSettings
// joins the two tables.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"
#include "util/settings.h"

namespace hone::serve {

struct ServeConfig {
  std::string models_dir;
  std::vector<std::string> models;  // -m FILE (repeatable)
  int slots = 4;                    // parallel sequences per model
  bool slots_set = false;           // given explicitly (else a tuned profile may choose)
  bool profiles = true;             // apply `hone tune` profiles
  int ctx = 4096;                   // context per slot
  int batch = 512;                  // most tokens per decode step
  int prefill_chunk = 256;          // most prompt tokens per step while others stream
  // Speculative decoding: auto (the tuned profile's choice, else none), none,
  // or a mode of engine/drafter.h; `draft`: a draft model file for every model.
  std::string spec = "auto";
  std::string draft;
  int spec_max = 64;            // most draft tokens per slot and step
  int spec_ngram = 0;           // n-gram lookup length; 0: llama.cpp's default
  double spec_min_gain = 0.97;  // drafting pauses below this share of plain tokens/s; 0: always
  int max_queue = 64;           // waiting requests per model before 429
  int inference_nice = 5;       // niceness of decode threads: HTTP and probes go first
  int threads = 0;              // 0 = physical cores
  std::string flash_attn = "auto";
  std::string kv_type = "f16";
  std::string kv_unified = "auto";  // auto, on or off: every slot in one KV stream (auto: one per slot)
  std::string load_mode = "mmap";
  std::string keep_alive = "5m";               // default idle time before unload; -1 = forever
  std::string memory_limit;                    // e.g. "8G"; empty = free memory (cgroup aware)
  double request_timeout = 600;                // seconds
  std::map<std::string, std::string> aliases;  // TOML [aliases] only
  // TOML [model_options.NAME] only: speculation per model, over the above,
  // and system prompts shared across tenants.
  struct ModelOptions {
    std::string spec;   // empty: the server's
    std::string draft;  // empty: the server's; "none": no draft model
    // Shared across tenants and warmed at load (serve/shared_prefixes.h).
    std::vector<std::string> shared_system_prompts;
  };
  std::map<std::string, ModelOptions> model_options;
  std::vector<std::string> pinned;  // model names never evicted
  std::string state_dir;            // the spend ledger's folder; empty: DefaultStateDir()
  // The prompt cache beyond the slots, per loaded model: "auto" (chosen from
  // the machine's memory and disk, printed at start), "0" (off) or a size.
  std::string cache_ram = "auto";
  std::string cache_disk = "auto";
  std::string cache_dir;  // empty: <state_dir>/prompt-cache
};

// $XDG_STATE_HOME/hone, else ~/.local/state/hone.
std::string DefaultStateDir();

const std::vector<Setting<ServeConfig>>& Settings();

// The prompt cache's budgets and folder from cache_ram, cache_disk and
// cache_dir, "auto" resolved against this machine's free memory and the
// folder's free disk. Errors: kInvalidArgument (a malformed size).
struct PromptCacheBudget {
  uint64_t ram_bytes = 0, disk_bytes = 0;
  std::string dir;
};
Result<PromptCacheBudget> ResolvePromptCacheBudget(const ServeConfig& c);

}  // namespace hone::serve
