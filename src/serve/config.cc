#include "serve/config.h"

#include <toml++/toml.h>

#include "hw/probe.h"
#include "util/units.h"

#include <cstdlib>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hone::serve {
namespace {

Status Int(const std::string& name, const std::string& v, int* out, int min) {
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= min && n <= 1 << 30) {
      *out = static_cast<int>(n);
      return Status::Ok();
    }
  } catch (...) {
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   name + ": '" + v + "' is not an integer >= " + std::to_string(min));
}

Status Fraction(const std::string& name, const std::string& v, double* out) {
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size() && d >= 0 && d <= 1) return *out = d, Status::Ok();
  } catch (...) {
  }
  return MakeError(ErrorCode::kInvalidArgument, name + ": '" + v + "' is not a number within [0, 1]");
}

// Whole seconds, at least 1: the watchdog checks twice a second.
Status Seconds(const std::string& name, const std::string& v, double* out) {
  int s = 0;
  Status st = Int(name, v, &s, 1);
  if (st) *out = s;
  return st;
}

Status Bool(const std::string& name, const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, Status::Ok();
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, Status::Ok();
  return MakeError(ErrorCode::kInvalidArgument, name + ": '" + v + "' is not true or false");
}

}  // namespace

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> kSettings = {
      {"models", "Folder of .gguf models to serve (name = file stem)",
       [](ServeConfig& c, const std::string& v) { return c.models_dir = v, Status::Ok(); }},
      {"host", "Address to bind",
       [](ServeConfig& c, const std::string& v) { return c.host = v, Status::Ok(); }},
      {"port", "Port (0 = any free port)",
       [](ServeConfig& c, const std::string& v) {
         Status s = Int("port", v, &c.port, 0);
         if (s && c.port > 65535)
           return Status(MakeError(ErrorCode::kInvalidArgument, "port: " + v + " is above 65535"));
         return s;
       }},
      {"probe-port",
       "Port for /health, /livez and /metrics alone, served by their own threads and without a key "
       "(default: off; 0 = any free port)",
       [](ServeConfig& c, const std::string& v) {
         Status s = Int("probe-port", v, &c.probe_port, 0);
         if (s && c.probe_port > 65535)
           return Status(MakeError(ErrorCode::kInvalidArgument, "probe-port: " + v + " is above 65535"));
         return s;
       }},
      {"metrics-compat", "vllm: /metrics also writes vLLM's names (vllm:num_requests_waiting, ...)",
       [](ServeConfig& c, const std::string& v) {
         if (v != "vllm" && v != "none")
           return Status(MakeError(ErrorCode::kInvalidArgument, "metrics-compat: '" + v + "' is not vllm or none"));
         c.metrics_compat = v == "none" ? "" : v;
         return Status::Ok();
       }},
      {"slots", "Parallel sequences per model (default: a tuned profile's, else 4)",
       [](ServeConfig& c, const std::string& v) {
         c.slots_set = true;
         return Int("slots", v, &c.slots, 1);
       }},
      {"profiles", "Apply tuned profiles from `hone tune` (true/false)",
       [](ServeConfig& c, const std::string& v) { return Bool("profiles", v, &c.profiles); }},
      {"ctx", "Context (tokens) per slot",
       [](ServeConfig& c, const std::string& v) { return Int("ctx", v, &c.ctx, 16); }},
      {"batch", "Most tokens per decode step",
       [](ServeConfig& c, const std::string& v) { return Int("batch", v, &c.batch, 1); }},
      {"prefill-chunk", "Most prompt tokens per step while other streams run",
       [](ServeConfig& c, const std::string& v) { return Int("prefill-chunk", v, &c.prefill_chunk, 1); }},
      {"spec",
       "Speculative decoding: none, or an n-gram drafter (ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod); "
       "the output is unchanged, only faster where the answer repeats its context",
       [](ServeConfig& c, const std::string& v) { return c.spec = v, Status::Ok(); }},
      {"spec-max", "Most tokens a slot drafts per step with --spec (it adapts below this to its acceptance)",
       [](ServeConfig& c, const std::string& v) { return Int("spec-max", v, &c.spec_max, 1); }},
      {"spec-ngram", "Tokens the n-gram lookup of --spec matches (0 = llama.cpp's default, 12)",
       [](ServeConfig& c, const std::string& v) { return Int("spec-ngram", v, &c.spec_ngram, 0); }},
      {"spec-min-gain",
       "With --spec, drafting pauses when it measures below this share of plain decoding's tokens/s "
       "(0.97; 0 = always draft)",
       [](ServeConfig& c, const std::string& v) { return Fraction("spec-min-gain", v, &c.spec_min_gain); }},
      {"max-queue", "Waiting requests per model before 429/503",
       [](ServeConfig& c, const std::string& v) { return Int("max-queue", v, &c.max_queue, 0); }},
      {"inference-nice",
       "Niceness of the decode threads (0-19; 0 = as the server): requests, refusals and /health preempt inference",
       [](ServeConfig& c, const std::string& v) {
         Status st = Int("inference-nice", v, &c.inference_nice, 0);
         if (st && c.inference_nice > 19) return Status(MakeError(ErrorCode::kInvalidArgument, "inference-nice must be 0..19"));
         return st;
       }},
      {"threads", "Threads (0 = physical cores)",
       [](ServeConfig& c, const std::string& v) { return Int("threads", v, &c.threads, 0); }},
      {"flash-attn", "auto, on or off",
       [](ServeConfig& c, const std::string& v) { return c.flash_attn = v, Status::Ok(); }},
      {"kv-type", "KV cache type (f16, q8_0, ...)",
       [](ServeConfig& c, const std::string& v) { return c.kv_type = v, Status::Ok(); }},
      {"load-mode", "mmap, no-mmap, mlock",
       [](ServeConfig& c, const std::string& v) { return c.load_mode = v, Status::Ok(); }},
      {"keep-alive", "Idle time before a model unloads (5m, 30s, 0, -1 = forever)",
       [](ServeConfig& c, const std::string& v) { return c.keep_alive = v, Status::Ok(); }},
      {"memory-limit", "Memory models may use (e.g. 8G; default: free memory, cgroup aware)",
       [](ServeConfig& c, const std::string& v) { return c.memory_limit = v, Status::Ok(); }},
      {"max-connections",
       "API requests on a worker at once (being answered, streamed or queued); beyond it 503 + Retry-After. "
       "Connections still sending their request, or idle, hold no worker",
       [](ServeConfig& c, const std::string& v) { return Int("max-connections", v, &c.max_connections, 1); }},
      {"max-connections-per-client",
       "Open API connections one client address may hold (0 = no cap); beyond it 429 at accept",
       [](ServeConfig& c, const std::string& v) {
         return Int("max-connections-per-client", v, &c.max_connections_per_client, 0);
       }},
      {"read-timeout", "Seconds a client may stay silent while sending its request (headers or body)",
       [](ServeConfig& c, const std::string& v) { return Int("read-timeout", v, &c.read_timeout, 1); }},
      {"header-timeout", "Seconds a client may take to send a whole request's headers (slowloris guard)",
       [](ServeConfig& c, const std::string& v) { return Seconds("header-timeout", v, &c.header_timeout); }},
      {"body-timeout", "Seconds a client may take to send a request's body, after its headers",
       [](ServeConfig& c, const std::string& v) { return Seconds("body-timeout", v, &c.body_timeout); }},
      {"drain-timeout", "Seconds a SIGTERM lets requests in flight finish before they are cut short",
       [](ServeConfig& c, const std::string& v) {
         int s = 0;
         Status st = Int("drain-timeout", v, &s, 0);
         if (st) c.drain_timeout = s;
         return st;
       }},
      {"request-timeout", "Seconds a request may run",
       [](ServeConfig& c, const std::string& v) {
         int s = 0;
         Status st = Int("request-timeout", v, &s, 1);
         if (st) c.request_timeout = s;
         return st;
       }},
      {"max-body", "Largest request body (e.g. 8M)",
       [](ServeConfig& c, const std::string& v) { return c.max_body = v, Status::Ok(); }},
      {"api-key-file", "File of API keys, one per line (Bearer auth)",
       [](ServeConfig& c, const std::string& v) { return c.api_key_file = v, Status::Ok(); }},
      {"api-keys", "Comma-separated API keys, from the environment or a config file only (a flag would show in ps)",
       [](ServeConfig& c, const std::string& v) { return c.api_keys = v, Status::Ok(); }},
      {"admin-key-file", "File of admin keys (load, unload, spend, canary); default: any API key",
       [](ServeConfig& c, const std::string& v) { return c.admin_key_file = v, Status::Ok(); }},
      {"admin-keys", "Comma-separated admin keys, from the environment or a config file only (a flag would show in ps)",
       [](ServeConfig& c, const std::string& v) { return c.admin_keys = v, Status::Ok(); }},
      {"cors-origin", "Allowed CORS origin (default: CORS off)",
       [](ServeConfig& c, const std::string& v) { return c.cors_origin = v, Status::Ok(); }},
      {"allowed-hosts",
       "Comma-separated Host names accepted on a loopback bind besides localhost ones ('*': any)",
       [](ServeConfig& c, const std::string& v) { return c.allowed_hosts = v, Status::Ok(); }},
      {"allowed-origins", "Comma-separated web origins accepted besides localhost ones ('*': any)",
       [](ServeConfig& c, const std::string& v) { return c.allowed_origins = v, Status::Ok(); }},
      {"pin", "Comma-separated models never evicted",
       [](ServeConfig& c, const std::string& v) { return c.pinned = SplitComma(v), Status::Ok(); }},
      {"state-dir", "Folder for the spend ledger (default ~/.local/state/hone)",
       [](ServeConfig& c, const std::string& v) { return c.state_dir = v, Status::Ok(); }},
      {"cache-ram",
       "Prompt cache in RAM per loaded model: a size (4G), 0 for off, or auto (a quarter of free memory, at most 8G)",
       [](ServeConfig& c, const std::string& v) { return c.cache_ram = v, Status::Ok(); }},
      {"cache-disk",
       "Prompt cache on disk per loaded model, kept across restarts: a size, 0 for off, or auto (a tenth of the "
       "free disk, at most 16G)",
       [](ServeConfig& c, const std::string& v) { return c.cache_disk = v, Status::Ok(); }},
      {"cache-dir", "Folder of the prompt cache's disk tier (default <state-dir>/prompt-cache)",
       [](ServeConfig& c, const std::string& v) { return c.cache_dir = v, Status::Ok(); }},
      {"quiet", "No per-request log lines",
       [](ServeConfig& c, const std::string& v) { return Bool("quiet", v, &c.quiet); }},
  };
  return kSettings;
}

std::string EnvName(const char* setting) {
  std::string s = "HONE_";
  for (const char* p = setting; *p; ++p) s += *p == '-' ? '_' : static_cast<char>(std::toupper(*p));
  return s;
}

Status ApplyEnv(ServeConfig& c, const std::function<const char*(const char*)>& getenv) {
  for (const Setting& s : Settings()) {
    const char* v = getenv(EnvName(s.name).c_str());
    if (!v || !*v) continue;
    if (Status st = s.set(c, v); !st)
      return MakeError(st.error().code, EnvName(s.name) + ": " + st.error().message);
  }
  return Status::Ok();
}

Status ApplyToml(ServeConfig& c, const std::string& path) {
  toml::table t;
  try {
    // Debian's toml++ is built with exceptions: parse errors arrive as one.
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream why;
    why << e.description() << " (line " << e.source().begin.line << ")";
    return MakeError(ErrorCode::kInvalidArgument, "config " + path + ": " + why.str());
  }
  for (const Setting& s : Settings()) {
    std::string key = s.name;
    for (char& ch : key) ch = ch == '-' ? '_' : ch;
    const toml::node* n = t.get(key);
    if (!n) continue;
    std::string v;
    if (auto str = n->value<std::string>())
      v = *str;
    else if (auto i = n->value<int64_t>())
      v = std::to_string(*i);
    else if (auto b = n->value<bool>())
      v = *b ? "true" : "false";
    else if (auto d = n->value<double>())
      v = std::to_string(static_cast<long long>(*d));
    else if (auto arr = n->as_array()) {
      for (const auto& e : *arr) {
        if (auto es = e.value<std::string>()) v += (v.empty() ? "" : ",") + *es;
      }
    } else {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + path + ": '" + key + "' has an unsupported type");
    }
    if (Status st = s.set(c, v); !st)
      return MakeError(st.error().code, "config " + path + ": " + st.error().message);
  }
  if (const toml::array* m = t["model"].as_array()) {
    for (const auto& e : *m) {
      if (auto s = e.value<std::string>()) c.models.push_back(*s);
    }
  }
  if (const toml::table* a = t["aliases"].as_table()) {
    for (const auto& [k, v] : *a) {
      auto target = v.value<std::string>();
      if (!target)
        return MakeError(ErrorCode::kInvalidArgument, "config " + path + ": aliases must map to model names");
      c.aliases[std::string(k.str())] = *target;
    }
  }
  return Status::Ok();
}

namespace {
Result<std::vector<std::string>> LoadKeys(const std::string& list, const std::string& file, const char* what) {
  std::vector<std::string> keys = SplitComma(list);
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) return MakeError(ErrorCode::kNotFound, std::string("cannot read the ") + what + " file " + file);
    for (std::string line; std::getline(f, line);) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
      if (!line.empty() && line[0] != '#') keys.push_back(line);
    }
    if (keys.empty()) return MakeError(ErrorCode::kInvalidArgument, std::string("the ") + what + " file " + file + " has no keys");
  }
  return keys;
}
}  // namespace

Result<std::vector<std::string>> LoadApiKeys(const ServeConfig& c) {
  return LoadKeys(c.api_keys, c.api_key_file, "API key");
}

Result<std::vector<std::string>> LoadAdminKeys(const ServeConfig& c) {
  return LoadKeys(c.admin_keys, c.admin_key_file, "admin key");
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
    // their slots come first, and the cache only saves prefill time.
    hw::ProbeOptions po;
    po.measure_bandwidth = false;
    auto m = hw::Probe(po);
    b.ram_bytes = std::min<uint64_t>(8 * kGiB, m ? m->usable_memory_bytes() / 4 : 0);
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
