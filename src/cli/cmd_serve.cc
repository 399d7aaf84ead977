// `hone serve`: the OpenAI- and Ollama-compatible server. Settings come from
// --config FILE (TOML), then HONE_* environment variables, then flags.
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <thread>

#include "api/http_server.h"
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

struct ServeArgs {
  std::string config_file;
  std::vector<std::string> models;
  std::map<std::string, std::string> flags;  // setting name -> value given on the command line
  std::map<std::string, CLI::Option*> options;
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

Result<serve::ServeConfig> BuildConfig(const ServeArgs& a) {
  serve::ServeConfig c;
  std::string config_file = a.config_file;
  if (config_file.empty()) {
    if (const char* env = std::getenv("HONE_CONFIG")) config_file = env;
  }
  if (!config_file.empty()) {
    if (Status s = serve::ApplyToml(c, config_file); !s) return s.error();
  }
  if (Status s = serve::ApplyEnv(c, [](const char* n) { return std::getenv(n); }); !s) return s.error();
  for (const serve::Setting& s : serve::Settings()) {
    auto it = a.options.find(s.name);
    if (it == a.options.end() || it->second->count() == 0) continue;
    // Any user of the machine reads a command line (ps, /proc/PID/cmdline).
    if (std::string_view(s.name) == "api-keys" || std::string_view(s.name) == "admin-keys") {
      const std::string file = std::string_view(s.name) == "api-keys" ? "--api-key-file" : "--admin-key-file";
      return MakeError(ErrorCode::kInvalidArgument,
                       "--" + std::string(s.name) + ": keys on the command line are visible to every user of this "
                           "machine; put them in a file (" + file + " FILE) or the environment (" +
                           serve::EnvName(s.name) + ")");
    }
    if (Status st = s.set(c, a.flags.at(s.name)); !st)
      return MakeError(st.error().code, "--" + std::string(s.name) + ": " + st.error().message);
  }
  c.models.insert(c.models.end(), a.models.begin(), a.models.end());
  if (c.models_dir.empty() && c.models.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "give a models folder (--models DIR) or model files (-m FILE)");
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
  s.cache.disk_bytes = cache->disk_bytes;
  s.cache.dir = cache->disk_bytes ? cache->dir : "";
  p.pinned = c.pinned;
  p.use_profiles = c.profiles;
  p.slots_explicit = c.slots_set;
  // As many may wait for a model's load as for its slots.
  p.max_load_waiters = std::max(1, c.max_queue);
  return p;
}

int Serve(const ServeArgs& a) {
  // Prompt-cache entries are megabytes each and come and go all day. glibc
  // raises its mmap threshold to the largest block freed, after which such
  // blocks come from the heap and its fragments are seldom given back: RSS
  // would creep past --cache-ram. A fixed threshold keeps them mmapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto config = BuildConfig(a);
  if (!config) return Fail(config.error().ToString(), 2);
  const serve::ServeConfig& c = *config;
  auto pool_opts = PoolOptionsFrom(c);
  if (!pool_opts) return Fail(pool_opts.error().ToString(), 2);
  // A speculation mode is checked now, not at the first model load.
  if (c.spec != "none") {
    if (auto d = engine::Drafter::Create(c.spec, 1, c.spec_ngram); !d) return Fail("spec: " + d.error().message, 2);
  }
  auto max_body = ParseSize(c.max_body);
  if (!max_body) return Fail("max-body: " + max_body.error().message, 2);
  auto keys = serve::LoadApiKeys(c);
  if (!keys) return Fail(keys.error().ToString(), 2);
  auto admin_keys = serve::LoadAdminKeys(c);
  if (!admin_keys) return Fail(admin_keys.error().ToString(), 2);
  auto registry = serve::Registry::Build(c.models_dir, c.models, c.aliases);
  if (!registry) return Fail(registry.error().ToString(), 2);
  for (const auto& p : c.pinned) {
    if (!registry->Resolve(p)) return Fail("pin: model '" + p + "' is not in the registry", 2);
  }

  serve::Metrics metrics;
  serve::ModelPool pool(*registry, *pool_opts, &metrics);
  serve::LocalBackend local(pool, metrics, c.request_timeout, c.threads);
  // [[upstream]] and [[route]] in the config: requests naming a route go
  // through the router; every other model name straight to the local backend.
  std::string config_file = a.config_file;
  if (config_file.empty())
    if (const char* env = std::getenv("HONE_CONFIG")) config_file = env;
  std::unique_ptr<route::Router> router;
  if (!config_file.empty()) {
    auto rc = route::LoadRouterConfig(config_file, [](const char* n) { return std::getenv(n); });
    if (!rc) return Fail(rc.error().ToString(), 2);
    for (const route::RouteConfig& r : rc->routes) {
      for (const route::Target& t : r.targets) {
        if (t.local() && !registry->Resolve(t.model))
          return Fail("route '" + r.name + "': target " + t.Label() + " is not in the model registry", 2);
      }
      if (r.canary && r.canary->target.local() && !registry->Resolve(r.canary->target.model))
        return Fail("route '" + r.name + "': canary target " + r.canary->target.Label() +
                        " is not in the model registry", 2);
    }
    if (!rc->empty()) {
      // The spend ledger, wherever there is an upstream to pay (a route over
      // local models only costs nothing and writes nothing) or a canary whose
      // state must survive a restart.
      std::unique_ptr<route::Spend> spend;
      const bool canary = std::any_of(rc->routes.begin(), rc->routes.end(), [](auto& r) { return r.canary.has_value(); });
      if (!rc->upstreams.empty() || canary) {
        if (Status tz = route::SetLedgerTimeZone(rc->spend.timezone); !tz) return Fail(tz.error().ToString(), 2);
        const std::string state_dir = c.state_dir.empty() ? serve::DefaultStateDir() : c.state_dir;
        auto opened = route::Spend::Open(rc->spend, state_dir);
        if (!opened) return Fail(opened.error().ToString(), 2);
        spend = std::move(*opened);
      }
      router = std::make_unique<route::Router>(std::move(*rc), local, std::move(spend));
    }
  }
  backend::Backend& backend = router ? static_cast<backend::Backend&>(*router) : local;
  // Each open connection is a file descriptor: thousands of idle or slow
  // clients need more than the usual soft limit of 1024.
  if (const OpenFilesLimit files = RaiseOpenFilesLimit(); files.after > files.before)
    std::fprintf(stderr, "hone serve: open-files limit raised from %llu to %llu (the hard limit)\n",
                 static_cast<unsigned long long>(files.before), static_cast<unsigned long long>(files.after));
  serve::LocalModelAdmin admin(pool);
  api::HttpServer server(c, *keys, *max_body, backend, admin, metrics);
  server.SetAdminKeys(*admin_keys);
  if (router) {
    server.SetRouterViews([&router] { return router->RoutesJson(); },
                          [&router](std::string* out) { router->RenderMetrics(out); });
    if (router->spend()) server.SetSpendView([&router] { return router->spend()->Json(); });
    server.SetCanaryControl(
        [&router](const std::string& route, const std::string& action) { return router->CanaryCommand(route, action); });
    router->WatchReload(&g_reload, [config_file] {
      return route::LoadRouterConfig(config_file, [](const char* n) { return std::getenv(n); });
    });
    std::signal(SIGHUP, OnHangup);
    router->StartHealthChecks();
    server.AddWorkers(std::min(512, router->UpstreamConcurrency()));
  }
  auto port = server.Bind();
  if (!port) return Fail(port.error().ToString());
  // Ready when at least one registry model has a readable GGUF header.
  int usable = 0;
  for (const auto& e : registry->entries()) {
    if (auto g = engine::ReadGguf(e.path))
      ++usable;
    else
      std::fprintf(stderr, "hone serve: warning: %s: %s\n", e.name.c_str(), g.error().ToString().c_str());
  }
  // Pinned models are meant to be resident: load them now, in the background
  // (the port is already bound), and answer /health 503 until they are in.
  std::thread preload;
  if (!c.pinned.empty()) {
    preload = std::thread([&pool, &server, &c] {
      int loaded = 0;
      for (const auto& name : c.pinned) {
        if (auto lease = pool.Acquire(name))
          ++loaded;
        else
          std::fprintf(stderr, "hone serve: pinned model '%s' failed to load: %s\n", name.c_str(),
                       lease.error().ToString().c_str());
      }
      server.SetReady(loaded > 0);
    });
  } else {
    server.SetReady(usable > 0);
  }
  if (server.probe_port() > 0)
    std::fprintf(stderr, "hone serve: probes (/health, /livez, /metrics) on http://%s:%d\n", c.host.c_str(),
                 server.probe_port());
  {
    const serve::PromptCacheOptions& pc = pool_opts->scheduler.cache;
    std::fprintf(stderr, "hone serve: prompt cache per model: RAM %.1f GiB, disk %.1f GiB%s%s\n",
                 pc.ram_bytes / 1073741824.0, pc.disk_bytes / 1073741824.0, pc.dir.empty() ? "" : " in ",
                 pc.dir.c_str());
  }
  std::fprintf(stderr, "hone serve: %zu model(s), %d slots x %d ctx; auth %s; listening on http://%s:%d\n",
               registry->entries().size(), c.slots, c.ctx, keys->empty() ? "off" : "on", c.host.c_str(),
               *port);
  std::fflush(stderr);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  std::atomic<bool> served{false};
  std::thread drainer([&] {
    while (!g_stop.load() && !served.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (served.load()) return;
    std::fprintf(stderr, "hone serve: draining (up to %.0f s; a second signal stops at once)\n",
                 c.drain_timeout);
    const int cut = server.Drain(c.drain_timeout);
    if (cut > 0) std::fprintf(stderr, "hone serve: %d request(s) cut short at the drain deadline\n", cut);
  });
  server.Run();
  served.store(true);
  drainer.join();
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
  for (const serve::Setting& s : serve::Settings()) {
    std::string help = std::string(s.help) + " [env " + serve::EnvName(s.name) + "]";
    a->options[s.name] = cmd->add_option("--" + std::string(s.name), a->flags[s.name], help);
  }
  return [a]() { return Serve(*a); };
}

const CommandRegistrar kRegistrar(90, &AddServeCommand);

}  // namespace
}  // namespace hone::cli
