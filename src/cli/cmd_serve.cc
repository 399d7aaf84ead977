// `hone serve`: the OpenAI- and Ollama-compatible server. Settings come from
// --config FILE (TOML), then HONE_* environment variables, then flags.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <thread>

#include "api/console.h"
#include "api/http_server.h"
#include "api/serve_settings.h"
#include "cli/commands.h"
#include "engine/drafter.h"
#include "engine/gguf_file.h"
#include "route/router.h"
#include "serve/config.h"
#include "serve/local_backend.h"
#include "serve/model_admin.h"
#include "serve/model_pool.h"
#include "serve/registry.h"
#include "util/open_files.h"
#include "util/units.h"

namespace hone::cli {
namespace {

// Model name -> the system prompts declared shared across tenants for it.
using SharedPrompts = std::map<std::string, std::vector<std::string>>;

struct ServeArgs {
  std::string config_file;
  std::vector<std::string> models;
  std::map<std::string, std::string> flags;  // setting name -> value given on the command line
  std::map<std::string, CLI::Option*> options;
  bool no_ui = false;  // --no-ui: the same as --ui false
};

// SIGTERM / SIGINT: the first asks for a drain (done by a thread, since a
// signal handler may do next to nothing); a second exits at once.
// Set by the signal handler, read by the drain thread: a lock-free atomic is
// both async-signal-safe and race-free (a sig_atomic_t is only the first).
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
void OnSignal(int) {
  if (g_stop.load()) _exit(1);
  g_stop.store(1);
}
// SIGHUP: reload the router's keys (read by the router's health thread).
std::atomic<bool> g_reload{false};
void OnHangup(int) { g_reload.store(true); }

bool HasModels(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf") return true;
  return false;
}

Result<api::ServeSettings> BuildConfig(const ServeArgs& a) {
  api::ServeSettings c;
  std::string config_file = a.config_file;
  if (config_file.empty()) {
    if (const char* env = std::getenv("HONE_CONFIG")) config_file = env;
  }
  if (!config_file.empty()) {
    if (Status s = api::ApplyToml(c, config_file); !s) return s.error();
  }
  if (Status s = api::ApplyEnv(c, [](const char* n) { return std::getenv(n); }); !s) return s.error();
  for (const Setting<api::ServeSettings>& s : api::AllSettings()) {
    auto it = a.options.find(s.name);
    if (it == a.options.end() || it->second->count() == 0) continue;
    // Any user of the machine reads a command line (ps, /proc/PID/cmdline).
    if (std::string_view(s.name) == "api-keys" || std::string_view(s.name) == "admin-keys") {
      const std::string file = std::string_view(s.name) == "api-keys" ? "--api-key-file" : "--admin-key-file";
      return MakeError(ErrorCode::kInvalidArgument,
                       "--" + std::string(s.name) +
                           ": keys on the command line are visible to every user of this "
                           "machine; put them in a file (" +
                           file + " FILE) or the environment (" + SettingEnvName(s.name) + ")");
    }
    if (Status st = s.set(c, a.flags.at(s.name)); !st)
      return MakeError(st.error().code, "--" + std::string(s.name) + ": " + st.error().message);
  }
  if (a.no_ui) c.http.ui = false;
  c.serve.models.insert(c.serve.models.end(), a.models.begin(), a.models.end());
  if (c.serve.models_dir.empty() && c.serve.models.empty()) {
    // As Ollama serves its own store: ./models, where ./setup.sh puts its
    // models, when it holds any and nothing else was named.
    if (!HasModels("models"))
      return MakeError(ErrorCode::kInvalidArgument,
                       "give a models folder (--models DIR) or model files (-m FILE); ./models has none");
    c.serve.models_dir = "models";
    std::fprintf(stderr, "hone serve: no --models or -m given: serving the models in ./models\n");
  }
  return c;
}

Result<serve::PoolOptions> PoolOptionsFrom(const serve::ServeConfig& c) {
  serve::PoolOptions p;
  serve::SchedulerOptions& s = p.scheduler;
  s.slots = c.slots, s.ctx_per_slot = c.ctx, s.batch = c.batch, s.prefill_chunk = c.prefill_chunk;
  s.spec = c.spec, s.spec_max = c.spec_max, s.spec_ngram = c.spec_ngram, s.spec_min_gain = c.spec_min_gain;
  s.max_queue = c.max_queue, s.threads = c.threads, s.kv_type = c.kv_type;
  s.nice = c.inference_nice;
  auto fa = engine::ParseFlashAttn(c.flash_attn);
  if (!fa) return fa.error();
  s.flash_attn = *fa;
  s.kv_unified = c.kv_unified == "on"    ? serve::KvUnified::kOn
                 : c.kv_unified == "off" ? serve::KvUnified::kOff
                                         : serve::KvUnified::kAuto;
  auto lm = engine::ParseLoadMode(c.load_mode);
  if (!lm) return lm.error();
  p.load_mode = *lm;
  auto ka = ParseDuration(c.keep_alive);
  if (!ka) return MakeError(ErrorCode::kInvalidArgument, "keep-alive: " + ka.error().message);
  p.default_keep_alive_s = *ka;
  if (!c.memory_limit.empty()) {
    auto m = ParseSize(c.memory_limit);
    if (!m) return MakeError(ErrorCode::kInvalidArgument, "memory-limit: " + m.error().message);
    p.memory_limit_bytes = *m;
  }
  auto cache = serve::ResolvePromptCacheBudget(c);
  if (!cache) return cache.error();
  s.cache.ram_bytes = cache->ram_bytes;
  // One RAM budget for every model's cache (the copies of `s` share it).
  s.cache.ram_limit = std::make_shared<serve::CacheRamLimit>(cache->ram_bytes);
  s.cache.disk_bytes = cache->disk_bytes;
  s.cache.dir = cache->disk_bytes ? cache->dir : "";
  p.draft = c.draft;
  for (const auto& [name, m] : c.model_options) p.per_model[name] = {m.spec, m.draft};
  p.pinned = c.pinned;
  p.use_profiles = c.profiles;
  p.slots_explicit = c.slots_set;
  // As many may wait for a model's load as for its slots.
  p.max_load_waiters = std::max(1, c.max_queue);
  return p;
}

// What `hone serve` checked and built before it starts serving.
struct Startup {
  serve::PoolOptions pool;
  uint64_t max_body = 0;
  std::vector<std::string> keys, admin_keys;
};

// Every setting checked before anything loads: a mistake exits 2 at once.
Result<Startup> CheckSettings(const api::ServeSettings& c) {
  Startup s;
  auto pool_opts = PoolOptionsFrom(c.serve);
  if (!pool_opts) return pool_opts.error();
  s.pool = std::move(*pool_opts);
  // A speculation mode is checked now, not at the first model load.
  if (Status st = engine::Drafter::CheckMode(c.serve.spec, !c.serve.draft.empty()); !st)
    return MakeError(ErrorCode::kInvalidArgument, "spec: " + st.error().message);
  for (const auto& [name, m] : c.serve.model_options) {
    const bool draft = m.draft.empty() ? !c.serve.draft.empty() : m.draft != "none";
    if (Status st = engine::Drafter::CheckMode(m.spec.empty() ? c.serve.spec : m.spec, draft); !st)
      return MakeError(ErrorCode::kInvalidArgument, "model_options." + name + ".spec: " + st.error().message);
  }
  auto max_body = ParseSize(c.http.max_body);
  if (!max_body) return MakeError(ErrorCode::kInvalidArgument, "max-body: " + max_body.error().message);
  s.max_body = *max_body;
  auto keys = api::LoadApiKeys(c.http);
  if (!keys) return keys.error();
  s.keys = std::move(*keys);
  auto admin_keys = api::LoadAdminKeys(c.http);
  if (!admin_keys) return admin_keys.error();
  s.admin_keys = std::move(*admin_keys);
  return s;
}

std::string ConfigFile(const ServeArgs& a) {
  if (!a.config_file.empty()) return a.config_file;
  const char* env = std::getenv("HONE_CONFIG");
  return env ? env : "";
}

// [[upstream]] and [[route]] in the config: requests naming a route go
// through the router; every other model name straight to the local backend.
// Null when the config has no routes.
// `shared`: each local target's shared system prompts (a route's), added to.
Result<std::unique_ptr<route::Router>> OpenRouter(const std::string& config_file, const serve::ServeConfig& c,
                                                  const serve::Registry& registry, serve::LocalBackend& local,
                                                  SharedPrompts* shared) {
  if (config_file.empty()) return std::unique_ptr<route::Router>();
  auto rc = route::LoadRouterConfig(config_file, [](const char* n) { return std::getenv(n); });
  if (!rc) return rc.error();
  auto bad = [](const std::string& why) { return MakeError(ErrorCode::kInvalidArgument, why); };
  for (const route::RouteConfig& r : rc->routes) {
    for (const route::Target& t : r.targets) {
      if (t.local() && !registry.Resolve(t.model))
        return bad("route '" + r.name + "': target " + t.Label() + " is not in the model registry");
      if (t.local()) {
        auto& list = (*shared)[(*registry.Resolve(t.model))->name];
        list.insert(list.end(), r.shared_system_prompts.begin(), r.shared_system_prompts.end());
      }
    }
    if (r.canary && r.canary->target.local() && !registry.Resolve(r.canary->target.model))
      return bad("route '" + r.name + "': canary target " + r.canary->target.Label() +
                 " is not in the model registry");
  }
  if (rc->empty()) return std::unique_ptr<route::Router>();
  // The spend ledger, wherever there is an upstream to pay (a route over
  // local models only costs nothing and writes nothing) or a canary whose
  // state must survive a restart.
  std::unique_ptr<route::Spend> spend;
  const bool canary =
      std::any_of(rc->routes.begin(), rc->routes.end(), [](auto& r) { return r.canary.has_value(); });
  if (!rc->upstreams.empty() || canary) {
    if (Status tz = route::SetLedgerTimeZone(rc->spend.timezone); !tz) return tz.error();
    const std::string state_dir = c.state_dir.empty() ? serve::DefaultStateDir() : c.state_dir;
    auto opened = route::Spend::Open(rc->spend, state_dir);
    if (!opened) return opened.error();
    spend = std::move(*opened);
  }
  return std::make_unique<route::Router>(std::move(*rc), local, std::move(spend));
}

// The router's views and controls on the server, key reloads on SIGHUP, and
// the upstreams' health checks.
void AttachRouter(route::Router& router, api::HttpServer& server, const std::string& config_file) {
  server.SetRouterViews([&router] { return router.RoutesJson(); },
                        [&router](std::string* out) { router.RenderMetrics(out); });
  if (router.spend()) server.SetSpendView([&router] { return router.spend()->Json(); });
  server.SetCanaryControl([&router](const std::string& route, const std::string& action) {
    return router.CanaryCommand(route, action);
  });
  router.WatchReload(&g_reload, [config_file] {
    return route::LoadRouterConfig(config_file, [](const char* n) { return std::getenv(n); });
  });
  std::signal(SIGHUP, OnHangup);
  router.StartHealthChecks();
  server.AddWorkers(std::min(512, router.UpstreamConcurrency()));
}

// Declares each model's shared system prompts ([model_options.NAME] and the
// routes') on the pool. Returns the models that have some: they load and
// warm at start. Errors: a name not in the registry, an empty prompt.
Result<std::vector<std::string>> DeclareSharedPrompts(const serve::ServeConfig& c, SharedPrompts shared,
                                                      serve::ModelPool& pool) {
  for (const auto& [name, m] : c.model_options) {
    auto& list = shared[name];
    list.insert(list.end(), m.shared_system_prompts.begin(), m.shared_system_prompts.end());
  }
  std::vector<std::string> warm;
  for (const auto& [name, prompts] : shared) {
    if (prompts.empty()) continue;
    if (Status st = pool.ShareSystemPrompts(name, prompts); !st)
      return MakeError(ErrorCode::kInvalidArgument,
                       "shared_system_prompts of '" + name + "': " + st.error().message);
    warm.push_back(name);
  }
  return warm;
}

// Ready when at least one registry model has a readable GGUF header; pinned
// models are meant to be resident: they load in the background (the port is
// already bound), and /health answers 503 until they are in. Models with
// shared system prompts (`warm`) load then too, to prefill them.
std::thread MarkReadiness(const serve::Registry& registry, const serve::ServeConfig& c,
                          const std::vector<std::string>& warm, serve::ModelPool& pool,
                          api::HttpServer& server) {
  int usable = 0;
  for (const auto& e : registry.entries()) {
    if (auto g = engine::ReadGguf(e.path))
      ++usable;
    else
      std::fprintf(stderr, "hone serve: warning: %s: %s\n", e.name.c_str(), g.error().ToString().c_str());
  }
  if (c.pinned.empty()) server.SetReady(usable > 0);
  if (c.pinned.empty() && warm.empty()) return std::thread();
  return std::thread([&pool, &server, &c, warm] {
    int loaded = 0;
    for (const auto& name : c.pinned) {
      if (auto lease = pool.Acquire(name))
        ++loaded;
      else
        std::fprintf(stderr, "hone serve: pinned model '%s' failed to load: %s\n", name.c_str(),
                     lease.error().ToString().c_str());
    }
    if (!c.pinned.empty()) server.SetReady(loaded > 0);
    for (const auto& name : warm) {
      if (auto lease = pool.Acquire(name); !lease)
        std::fprintf(stderr, "hone serve: '%s' (shared system prompts to warm) failed to load: %s\n",
                     name.c_str(), lease.error().ToString().c_str());
    }
  });
}

// An address a browser on this machine can open: the wildcard binds mean
// "this machine", and an IPv6 literal needs brackets in a URL.
std::string BrowsableHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::" || host == "[::]") return "[::1]";
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
  return host;
}

void PrintListening(const api::ServeSettings& c, const Startup& s, const serve::Registry& registry,
                    const api::HttpServer& server, int port) {
  if (server.probe_port() > 0)
    std::fprintf(stderr, "hone serve: probes (/health, /livez, /metrics) on http://%s:%d\n",
                 c.http.host.c_str(), server.probe_port());
  const serve::PromptCacheOptions& pc = s.pool.scheduler.cache;
  std::fprintf(stderr, "hone serve: prompt cache: RAM %.1f GiB for all models, disk %.1f GiB per model%s%s\n",
               pc.ram_bytes / 1073741824.0, pc.disk_bytes / 1073741824.0, pc.dir.empty() ? "" : " in ",
               pc.dir.c_str());
  std::fprintf(stderr, "hone serve: %zu model(s), %d slots x %d ctx; auth %s; listening on http://%s:%d\n",
               registry.entries().size(), c.serve.slots, c.serve.ctx, s.keys.empty() ? "off" : "on",
               c.http.host.c_str(), port);
  if (c.http.ui && api::ConsoleBuiltIn())
    std::fprintf(stderr, "hone serve: web console on http://%s:%d/ui/\n", BrowsableHost(c.http.host).c_str(),
                 port);
  std::fflush(stderr);
}

// Serves until SIGTERM/SIGINT, then drains for --drain-timeout.
void ServeUntilStopped(api::HttpServer& server, double drain_timeout) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  std::atomic<bool> served{false};
  std::thread drainer([&] {
    while (!g_stop.load() && !served.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (served.load()) return;
    std::fprintf(stderr, "hone serve: draining (up to %.0f s; a second signal stops at once)\n",
                 drain_timeout);
    const int cut = server.Drain(drain_timeout);
    if (cut > 0) std::fprintf(stderr, "hone serve: %d request(s) cut short at the drain deadline\n", cut);
  });
  server.Run();
  served.store(true);
  drainer.join();
}

int Serve(const ServeArgs& a) {
  // Prompt-cache entries are megabytes each and come and go all day. glibc
  // raises its mmap threshold to the largest block freed, after which such
  // blocks come from the heap and its fragments are seldom given back: RSS
  // would creep past --cache-ram. A fixed threshold keeps them mmapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto config = BuildConfig(a);
  if (!config) return Fail(config.error().ToString(), 2);
  const api::ServeSettings& c = *config;
  auto startup = CheckSettings(c);
  if (!startup) return Fail(startup.error().ToString(), 2);
  auto registry = serve::Registry::Build(c.serve.models_dir, c.serve.models, c.serve.aliases);
  if (!registry) return Fail(registry.error().ToString(), 2);
  for (const auto& p : c.serve.pinned) {
    if (!registry->Resolve(p)) return Fail("pin: model '" + p + "' is not in the registry", 2);
  }
  serve::Metrics metrics;
  serve::ModelPool pool(*registry, startup->pool, &metrics);
  serve::LocalBackend local(pool, metrics, c.serve.request_timeout, c.serve.threads);
  const std::string config_file = ConfigFile(a);
  SharedPrompts shared;
  auto router = OpenRouter(config_file, c.serve, *registry, local, &shared);
  if (!router) return Fail(router.error().ToString(), 2);
  auto warm = DeclareSharedPrompts(c.serve, std::move(shared), pool);
  if (!warm) return Fail(warm.error().ToString(), 2);
  backend::Backend& backend = *router ? static_cast<backend::Backend&>(**router) : local;
  // Each open connection is a file descriptor: thousands of idle or slow
  // clients need more than the usual soft limit of 1024.
  if (const OpenFilesLimit files = RaiseOpenFilesLimit(); files.after > files.before)
    std::fprintf(stderr, "hone serve: open-files limit raised from %llu to %llu (the hard limit)\n",
                 static_cast<unsigned long long>(files.before), static_cast<unsigned long long>(files.after));
  serve::LocalModelAdmin admin(pool);
  api::HttpServer server(c.http, startup->keys, startup->max_body, backend, admin, metrics,
                         c.serve.slots * 4 + c.serve.max_queue / 2);
  server.SetAdminKeys(startup->admin_keys);
  if (*router) AttachRouter(**router, server, config_file);
  auto port = server.Bind();
  if (!port) return Fail(port.error().ToString());
  std::thread preload = MarkReadiness(*registry, c.serve, *warm, pool, server);
  PrintListening(c, *startup, *registry, server, *port);
  ServeUntilStopped(server, c.http.drain_timeout);
  if (preload.joinable()) preload.join();
  std::fprintf(stderr, "hone serve: stopped\n");
  return 0;
}

Runner AddServeCommand(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd =
      app.add_subcommand("serve", "OpenAI- and Ollama-compatible server with continuous batching");
  cmd->add_option("--config", a->config_file, "TOML config file (settings as keys, [aliases], pin = [...])");
  cmd->add_option("-m,--model", a->models, "Model file to serve (repeatable; name = file stem)");
  for (const Setting<api::ServeSettings>& s : api::AllSettings()) {
    std::string help = std::string(s.help) + " [env " + SettingEnvName(s.name) + "]";
    a->options[s.name] = cmd->add_option("--" + std::string(s.name), a->flags[s.name], help);
  }
  cmd->add_flag("--no-ui", a->no_ui, "No web console at /ui/ (the same as --ui false)");
  return [a]() { return Serve(*a); };
}

const CommandRegistrar kRegistrar(90, &AddServeCommand);

}  // namespace
}  // namespace hone::cli
