// The router: a Backend over the local backend and remote upstreams. A
// request naming a [[route]] is served by that route's targets, in the order
// its policy gives; any other name goes to the local backend unchanged.
//
//   local_first  the local model, unless its scheduler predicts a time to
//                first token over the route's ttft_slo or its queue is full
//                (decided before sending, from the real queue: an overflow);
//                then the next targets; the local model again as a last
//                resort when every other target failed.
//   failover     the targets in order; the next one only on failure.
//   weighted     one target drawn by weight, the others in order behind it.
//   affinity     over hone replicas (kind = "hone"): the target with the least
//                predicted time to first token, counting its queue and the
//                prompt prefix it has likely cached (replica_picker.h); the
//                others by the same estimate behind it.
//   round_robin  the targets in turn (affinity's baseline in bench/replicas.mjs).
//
// Per upstream target: its circuit breaker is asked first (open: skipped, no
// request sent); failures are retried with backoff and jitter up to the
// route's max_attempts within its deadline (connect, timeout, 429 honouring
// Retry-After, 5xx); a 401/403 moves to the next key at once; a 4xx is the
// client's error and is returned as is. A request that failed before any
// byte reached the client moves on to the next target. A stream that breaks
// after bytes went out is continued on the next target that can (RoutedCompletion).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "route/canary_arms.h"
#include "route/config.h"
#include "route/http_client.h"
#include "route/remote_backend.h"
#include "route/replica_picker.h"
#include "route/response_cache.h"
#include "route/route_metrics.h"
#include "route/spend.h"
#include "route/target_starter.h"
#include "backend/backend.h"
#include "serve/local_backend.h"

namespace hone::route {

class Router final : public backend::Backend {
 public:
  // `spend`: the ledger and budgets; null runs without them (no rows, no caps).
  Router(RouterConfig config, serve::LocalBackend& local, std::unique_ptr<Spend> spend = nullptr);
  ~Router() override;  // stops the health checks

  Result<std::unique_ptr<backend::Completion>> Start(const backend::GenerationRequest& r) override;
  Result<backend::Embeddings> Embed(const backend::EmbeddingRequest& r,
                                  const std::function<bool()>& cancelled) override;
  std::vector<backend::ModelCard> ListModels() override;
  Result<backend::Loaded> Load(const std::string& model, std::optional<double> keep_alive_s) override;
  // With a route's first local target; a route without one cannot count.
  Result<int> CountPromptTokens(const backend::GenerationRequest& r) override;

  // Active health checks of every upstream, every health_interval.
  void StartHealthChecks();
  // A config reload (SIGHUP): the keys of every upstream still named in the
  // new config, revoked and cooling keys usable again. Routes and upstreams
  // themselves change only with a restart. Returns how many were reloaded.
  int ReloadKeys(const RouterConfig& fresh);
  // Called from the health thread about once a second: when `pending` is
  // set it is cleared and `load` is read and applied with ReloadKeys.
  void WatchReload(std::atomic<bool>* pending, std::function<Result<RouterConfig>()> load);
  // GET /hone/routes: every route, target, breaker and key state (keys by
  // fingerprint only), and the overflow rate.
  std::string RoutesJson() const;
  // The router's /metrics series, gauges included.
  void RenderMetrics(std::string* out) const;
  bool empty() const { return routes_.empty(); }
  // `hone route canary promote|rollback` (POST /hone/routes/canary): the
  // canary's state afterwards as JSON; kNotFound for a route without one.
  Result<std::string> CanaryCommand(const std::string& route, const std::string& action);
  // The ledger and budgets (GET /hone/spend); null without them.
  Spend* spend() const { return spend_.get(); }
  // Streams the upstreams may carry at once (their max_concurrent, summed).
  int UpstreamConcurrency() const;

 private:
  struct RouteState {
    RouteConfig config;
    std::atomic<long> requests{0};
    std::atomic<long> overflowed{0};
    std::atomic<long> cache_hits{0};
    std::atomic<long> cache_misses{0};
    std::unique_ptr<CanaryArms> arms;  // null without a [route.canary]
    // Held from a local forecast until that request is in the scheduler's
    // queue: a burst of requests must not all read the same empty queue.
    std::mutex admit_mu;
  };
  RouteState* Find(const std::string& name) const;
  // Start without the response cache: `route`'s targets in policy order
  // (`route` is st->config or one of its canary arms). `on_end` goes to the
  // RoutedCompletion; `count` is false for shadow copies.
  Result<std::unique_ptr<backend::Completion>> StartRoute(RouteState* st, const RouteConfig& route,
                                                        const backend::GenerationRequest& r,
                                                        AnswerEnd on_end = nullptr, bool count = true);
  // Start through the response cache when the route and request allow it.
  Result<std::unique_ptr<backend::Completion>> StartCached(
      RouteState* st, const backend::GenerationRequest& r, const std::string& arm_suffix,
      const std::function<Result<std::unique_ptr<backend::Completion>>()>& start);
  // Whether local_first's forecast sends this request past local target `t`
  // (queue full, or TTFT over the SLO): the reason, or empty to try it.
  std::string OverflowReason(const RouteConfig& route, const serve::LocalBackend::Forecast& f) const;
  RemoteBackend* Upstream(const std::string& name) const { return starter_.Upstream(name); }
  // Targets in the policy's order; for affinity, `blocks` gets the prompt's
  // prefix blocks (recorded at the target that takes the request).
  // and `pending` the first pick's unseen prompt tokens (ReplicaPicker::Pending).
  std::vector<size_t> Order(const RouteConfig& r, const backend::GenerationRequest& req, PromptBlocks* blocks,
                            std::unique_ptr<ReplicaPicker::Pending>* pending);
  void HealthLoop();

  serve::LocalBackend& local_;
  std::unique_ptr<Spend> spend_;  // null: no ledger
  std::unique_ptr<ResponseCache> cache_;  // null: no [cache]
  HttpClient http_;
  std::map<std::string, std::unique_ptr<RemoteBackend>> upstreams_;  // fixed after construction
  RouteMetrics metrics_;
  TargetStarter starter_;  // over local_, upstreams_, spend_ and metrics_
  std::map<std::string, std::unique_ptr<RouteState>> routes_;        // fixed after construction
  std::vector<std::string> route_order_;                             // as configured
  ReplicaPicker picker_;  // replicas' scraped load and the prefix index (thread-safe)
  std::atomic<uint64_t> rotation_{0};  // round_robin's turn; affinity's tie-break
  std::mutex rng_mu_;
  std::mt19937 rng_;  // GUARDED_BY(rng_mu_): weighted draws
  std::mutex health_mu_;
  std::condition_variable health_cv_;
  bool stopping_ = false;                              // GUARDED_BY(health_mu_)
  std::atomic<bool>* reload_pending_ = nullptr;        // set before StartHealthChecks
  std::function<Result<RouterConfig>()> reload_load_;  // set before StartHealthChecks
  std::thread health_;
};

}  // namespace hone::route
