// `hone serve` settings. Each one can come from the TOML config file, an
// environment variable (HONE_<NAME>), or a flag (--<name>), later sources
// winning in that order. The table in config.cc lists them once for all three.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::serve {

struct ServeConfig {
  std::string models_dir;
  std::vector<std::string> models;  // -m FILE (repeatable)
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (printed at start)
  int probe_port = -1;      // /health, /livez, /metrics on their own workers; -1: off, 0: any free port
  std::string metrics_compat;  // "vllm": also write vllm:-named series for endpoint pickers
  int slots = 4;            // parallel sequences per model
  bool slots_set = false;   // given explicitly (else a tuned profile may choose)
  bool profiles = true;     // apply `hone tune` profiles
  int ctx = 4096;           // context per slot
  int batch = 512;          // most tokens per decode step
  int prefill_chunk = 256;  // most prompt tokens per step while others stream
  std::string spec = "none";  // speculative decoding: none or an n-gram drafter (engine/drafter.h)
  int spec_max = 16;          // most draft tokens per slot and step
  int spec_ngram = 0;         // n-gram lookup length; 0: llama.cpp's default
  double spec_min_gain = 0.97;  // drafting pauses below this share of plain tokens/s; 0: always
  int max_queue = 64;       // waiting requests per model before 429
  int inference_nice = 5;   // niceness of decode threads: HTTP and probes go first
  int threads = 0;          // 0 = physical cores
  std::string flash_attn = "auto";
  std::string kv_type = "f16";
  std::string load_mode = "mmap";
  std::string keep_alive = "5m";  // default idle time before unload; -1 = forever
  std::string memory_limit;       // e.g. "8G"; empty = free memory (cgroup aware)
  double request_timeout = 600;   // seconds
  double drain_timeout = 30;      // seconds SIGTERM lets requests in flight finish
  std::string max_body = "8M";
  int max_connections = 1024;  // API requests on a worker at once (answered, streamed, queued); beyond: 503
  int max_connections_per_client = 0;  // open API connections per client address (0: no cap); beyond: 429
  int read_timeout = 30;       // seconds a client may take to send a chunk of its request (headers or body)
  double header_timeout = 30;  // seconds for a whole request's headers (from accept, or the previous answer)
  double body_timeout = 120;   // seconds for a request's body, after its headers
  std::string api_key_file;                    // one key per line
  std::string api_keys;                        // comma-separated (HONE_API_KEYS); prefer the file
  std::string admin_key_file;                  // keys for the admin endpoints, one per line
  std::string admin_keys;                      // comma-separated (HONE_ADMIN_KEYS)
  std::string cors_origin;                     // empty = CORS off
  std::string allowed_hosts;                   // comma-separated Host names beyond loopback ones
  std::string allowed_origins;                 // comma-separated web origins beyond loopback ones
  std::map<std::string, std::string> aliases;  // TOML [aliases] only
  std::vector<std::string> pinned;             // model names never evicted
  bool quiet = false;                          // no per-request log lines
  std::string state_dir;                       // the spend ledger's folder; empty: DefaultStateDir()
  // The prompt cache beyond the slots, per loaded model: "auto" (chosen from
  // the machine's memory and disk, printed at start), "0" (off) or a size.
  std::string cache_ram = "auto";
  std::string cache_disk = "auto";
  std::string cache_dir;  // empty: <state_dir>/prompt-cache
};

// $XDG_STATE_HOME/hone, else ~/.local/state/hone.
std::string DefaultStateDir();

struct Setting {
  const char* name;  // flag --name, env HONE_NAME (upper case, '-' -> '_'), TOML key name ('-' -> '_')
  const char* help;
  std::function<Status(ServeConfig&, const std::string&)> set;
};
const std::vector<Setting>& Settings();

// TOML file: the settings as top-level keys, plus [aliases] and pinned = [...].
Status ApplyToml(ServeConfig& c, const std::string& path);
// HONE_* variables from `getenv`.
Status ApplyEnv(ServeConfig& c, const std::function<const char*(const char*)>& getenv);
std::string EnvName(const char* setting);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitComma(const std::string& s);
// Keys from api_key_file and api_keys; empty = no authentication.
Result<std::vector<std::string>> LoadApiKeys(const ServeConfig& c);
// Keys from admin_key_file and admin_keys: with any, only they reach the admin
// endpoints (load, unload, spend, canary commands); empty = any API key does.
Result<std::vector<std::string>> LoadAdminKeys(const ServeConfig& c);

// The prompt cache's budgets and folder from cache_ram, cache_disk and
// cache_dir, "auto" resolved against this machine's free memory and the
// folder's free disk. Errors: kInvalidArgument (a malformed size).
struct PromptCacheBudget {
  uint64_t ram_bytes = 0, disk_bytes = 0;
  std::string dir;
};
Result<PromptCacheBudget> ResolvePromptCacheBudget(const ServeConfig& c);

}  // namespace hone::serve
