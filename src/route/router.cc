#include "route/router.h"

#include <algorithm>
#include <numeric>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "route/refusals.h"
#include "route/routed_completion.h"

namespace hone::route {
namespace {

using backend::Clock;
using Dur = std::chrono::duration<double>;


// The failures of a route's targets, summed into the one error the client
// gets: the targets' common code, else 502, or 429/503 when every target
// only asked to wait; the shortest Retry-After any of them gave.
struct RouteFailures {
  std::vector<std::string> lines;
  bool all_unavailable = true;  // every target refused with kUnavailable or kRateLimited
  bool any_rate_limited = false;
  std::optional<ErrorCode> same_code;  // set while every failure had this code
  bool mixed = false;
  int retry_after = 0;

  void Add(const std::string& target, const Error& e) {
    if (e.code == ErrorCode::kRateLimited)
      any_rate_limited = true;
    else if (e.code != ErrorCode::kUnavailable)
      all_unavailable = false;
    if (e.retry_after_s > 0) retry_after = retry_after ? std::min(retry_after, e.retry_after_s) : e.retry_after_s;
    lines.push_back(target + ": " + e.message);
    if (same_code && *same_code != e.code) mixed = true;
    same_code = e.code;
  }
  // A local target tried last, after an overflow sent the request past it.
  void AddLastResort(const std::string& target, const Error& e) {
    lines.push_back(target + ": " + e.message);
    all_unavailable = all_unavailable && e.code == ErrorCode::kUnavailable;
  }
  Error Summary(const std::string& route) const {
    std::string why = "route '" + route + "': no target could serve the request";
    for (const std::string& f : lines) why += "; " + f;
    Error e = MakeError(!mixed && same_code ? *same_code
                        : !all_unavailable  ? ErrorCode::kUpstream
                        : any_rate_limited  ? ErrorCode::kRateLimited
                                            : ErrorCode::kUnavailable,
                        why);
    e.retry_after_s = std::max(1, retry_after);
    return e;
  }
};

}  // namespace

Router::Router(RouterConfig config, serve::LocalBackend& local, std::unique_ptr<Spend> spend)
    : local_(local),
      spend_(std::move(spend)),
      starter_(local_, upstreams_, spend_.get(), metrics_),
      rng_(std::random_device{}()) {
  if (config.cache.enabled) cache_ = std::make_unique<ResponseCache>(config.cache.max_bytes, config.cache.ttl_s);
  for (UpstreamConfig& u : config.upstreams) {
    std::string name = u.name;
    upstreams_[name] = std::make_unique<RemoteBackend>(std::move(u), http_);
  }
  const double now_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (RouteConfig& r : config.routes) {
    route_order_.push_back(r.name);
    auto st = std::make_unique<RouteState>();
    if (r.canary) st->arms = std::make_unique<CanaryArms>(r, spend_ ? &spend_->ledger() : nullptr, now_unix);
    st->config = std::move(r);
    routes_[route_order_.back()] = std::move(st);
  }
}

Router::~Router() {
  // Shadow copies run StartRoute on their own threads: they end before any member goes.
  for (auto& [name, st] : routes_)
    if (st->arms) st->arms->StopShadows();
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    stopping_ = true;
  }
  health_cv_.notify_all();
  if (health_.joinable()) health_.join();
}

Router::RouteState* Router::Find(const std::string& name) const {
  auto it = routes_.find(name);
  return it == routes_.end() ? nullptr : it->second.get();
}

std::vector<size_t> Router::Order(const RouteConfig& r, const backend::GenerationRequest& req, PromptBlocks* blocks,
                                  std::unique_ptr<ReplicaPicker::Pending>* pending) {
  std::vector<size_t> order(r.targets.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (r.policy == Policy::kWeighted) {
    std::lock_guard<std::mutex> lock(rng_mu_);
    std::discrete_distribution<size_t> pick(r.weights.begin(), r.weights.end());
    size_t first = pick(rng_);
    std::rotate(order.begin(), order.begin() + first, order.begin() + first + 1);
  } else if (r.policy == Policy::kLocalFirst) {
    std::stable_partition(order.begin(), order.end(), [&](size_t i) { return r.targets[i].local(); });
  } else if (r.policy == Policy::kRoundRobin && !order.empty()) {
    std::rotate(order.begin(), order.begin() + rotation_.fetch_add(1) % order.size(), order.end());
  } else if (r.policy == Policy::kAffinity) {
    *blocks = PrefixBlocks(req);
    std::vector<ReplicaPicker::Candidate> cs;
    for (const Target& t : r.targets) {
      ReplicaPicker::Candidate c;
      c.label = t.Label();
      if (t.local()) {
        c.model = t.model;
        c.local_ttft_s = local_.Predict(TargetStarter::ForTarget(req, t)).load.ttft_s;
      } else if (RemoteBackend* up = Upstream(t.upstream)) {
        c.upstream = t.upstream;
        c.model = up->UpstreamModel(t.model);
        c.in_flight = up->in_flight();
        c.excluded = up->breaker().state() == BreakerState::kOpen;
      }
      cs.push_back(std::move(c));
    }
    order = picker_.Order(cs, *blocks, rotation_.fetch_add(1));
    // Recorded at once, not when the target answers: a burst of one tenant's
    // requests must find where the first of them went.
    if (!order.empty()) {
      *pending = picker_.AddPending(cs[order.front()].label, *blocks);
      picker_.Record(cs[order.front()].label, *blocks);
    }
  }
  return order;
}

Result<std::unique_ptr<backend::Completion>> Router::Start(const backend::GenerationRequest& r) {
  RouteState* st = Find(r.model);
  if (!st) return local_.Start(r);  // not a route: a local model, as without a router
  // A canary picks the arm first: the cache is kept per arm too.
  CanaryArms::Choice arm;
  if (st->arms) {
    arm = st->arms->Choose(r, [this, st](const RouteConfig& route, const backend::GenerationRequest& copy,
                                         AnswerEnd on_end) {
      return StartRoute(st, route, copy, std::move(on_end), /*count=*/false);
    });
  }
  const RouteConfig& route = arm.route ? *arm.route : st->config;
  auto start = [&]() -> Result<std::unique_ptr<backend::Completion>> {
    auto c = StartRoute(st, route, r, arm.on_end);
    // A refusal that is the request's own says nothing about the arm; the
    // rest is the arm failing.
    if (!c && arm.on_end && !RequestsOwnRefusal(c.error())) arm.on_end(std::nullopt, 0, true, 0);
    return c;
  };
  return StartCached(st, r, arm.cache_suffix, start);
}

Result<std::unique_ptr<backend::Completion>> Router::StartCached(
    RouteState* st, const backend::GenerationRequest& r, const std::string& arm_suffix,
    const std::function<Result<std::unique_ptr<backend::Completion>>()>& start) {
  const RouteConfig::CacheMode mode = st->config.cache;
  const bool cacheable = cache_ && !r.routing.no_cache && mode != RouteConfig::CacheMode::kOff &&
                         (mode == RouteConfig::CacheMode::kAll || Deterministic(r));
  if (!cacheable) return start();
  std::string key = CacheKey(r);
  if (key.empty()) return start();
  key += arm_suffix;
  if (auto hit = cache_->Get(key)) {
    ++st->requests;
    ++st->cache_hits;
    metrics_.Add(series::kCache, Labels({{"route", st->config.name}, {"result", "hit"}}));
    return std::unique_ptr<backend::Completion>(
        std::make_unique<CachedCompletion>(std::move(hit), "route=" + st->config.name + " cache=hit"));
  }
  ++st->cache_misses;
  metrics_.Add(series::kCache, Labels({{"route", st->config.name}, {"result", "miss"}}));
  auto started = start();
  if (!started) return started;
  return std::unique_ptr<backend::Completion>(
      std::make_unique<RecordingCompletion>(std::move(*started), cache_.get(), key));
}

std::string Router::OverflowReason(const RouteConfig& route, const serve::LocalBackend::Forecast& f) const {
  if (f.load.queue_full) return "queue_full";
  if (route.ttft_slo_s > 0 && f.load.ttft_s > route.ttft_slo_s) return f.loaded ? "ttft_slo" : "cold_model";
  return "";
}

Result<std::unique_ptr<backend::Completion>> Router::StartRoute(RouteState* st, const RouteConfig& route,
                                                              const backend::GenerationRequest& r, AnswerEnd on_end,
                                                              bool count) {
  if (count) ++st->requests;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(Dur(route.retry.deadline_s));
  PromptBlocks blocks;
  std::unique_ptr<ReplicaPicker::Pending> pending;
  std::vector<size_t> order = Order(route, r, &blocks, &pending);
  std::vector<size_t> deferred;  // local targets skipped for overflow: the last resort
  std::string overflow;
  RouteFailures failures;
  int attempts = 0;
  const bool has_remote =
      std::any_of(route.targets.begin(), route.targets.end(), [](auto& t) { return !t.local(); });
  auto finish = [&](size_t i, TargetStarter::Started&& tt) -> std::unique_ptr<backend::Completion> {
    std::string note = "route=" + route.name + " target=" + route.targets[i].Label() +
                       " attempts=" + std::to_string(attempts + tt.attempts) +
                       (overflow.empty() ? "" : " overflow=" + overflow);
    std::vector<size_t> rest;
    for (size_t j : order)
      if (j != i) rest.push_back(j);
    // Order() recorded the first pick; a fallback that took it is recorded too.
    if (route.policy == Policy::kAffinity && !order.empty() && i != order.front()) {
      pending = picker_.AddPending(route.targets[i].Label(), blocks);
      picker_.Record(route.targets[i].Label(), blocks);
    }
    auto rc = std::make_unique<RoutedCompletion>(&starter_, &route, r, i, std::move(rest), std::move(tt), start, note);
    if (on_end) rc->SetOnEnd(on_end);
    if (pending) rc->SetPending(std::move(pending));
    return rc;
  };
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const size_t i = order[pos];
    const Target& t = route.targets[i];
    std::unique_lock<std::mutex> admitting;
    std::optional<serve::LocalBackend::Forecast> forecast;
    if (t.local() && route.policy == Policy::kLocalFirst && has_remote) {
      admitting = std::unique_lock<std::mutex>(st->admit_mu);
      forecast = local_.Predict(TargetStarter::ForTarget(r, t));
      if (!forecast->loaded) admitting.unlock();  // a cold load must not hold up the route
      const std::string why = OverflowReason(route, *forecast);
      if (!why.empty()) {
        overflow = why;
        if (count) ++st->overflowed;
        metrics_.Add(series::kOverflow, Labels({{"route", route.name}, {"reason", why}}));
        deferred.push_back(i);
        continue;
      }
    }
    bool budget_refused = false;
    auto tt = starter_.Start(route, t, r, deadline, forecast ? &*forecast : nullptr, &budget_refused);
    if (admitting) admitting.unlock();  // queued (or refused): the next forecast sees it
    if (tt) return finish(i, std::move(*tt));
    const Error& e = tt.error();
    if (SameOnEveryTarget(e) || e.code == ErrorCode::kAborted) {
      metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", t.Label()}, {"outcome", CodeLabel(e.code)}}));
      return e;
    }
    if (budget_refused && route.on_budget == RouteConfig::OnBudget::kRefuse) {
      metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", "none"}, {"outcome", "budget"}}));
      return e;  // 429 naming the budget
    }
    if (t.local() && e.code == ErrorCode::kBusy) {
      overflow = "queue_full";
      ++st->overflowed;
      metrics_.Add(series::kOverflow, Labels({{"route", route.name}, {"reason", "queue_full"}}));
    }
    failures.Add(t.Label(), e);
    ++attempts;
  }
  // Every other target failed: a slow local answer beats none.
  for (size_t i : deferred) {
    auto tt = starter_.Start(route, route.targets[i], r, deadline);
    if (tt) {
      overflow += "+last_resort";
      return finish(i, std::move(*tt));
    }
    failures.AddLastResort(route.targets[i].Label(), tt.error());
  }
  metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", "none"}, {"outcome", "failed"}}));
  return failures.Summary(route.name);
}

Result<backend::Embeddings> Router::Embed(const backend::EmbeddingRequest& r,
                                        const std::function<bool()>& cancelled) {
  RouteState* st = Find(r.model);
  if (!st) return local_.Embed(r, cancelled);
  const RouteConfig& route = st->config;
  ++st->requests;
  const bool has_remote =
      std::any_of(route.targets.begin(), route.targets.end(), [](auto& t) { return !t.local(); });
  Error last = MakeError(ErrorCode::kUpstream, "route '" + r.model + "' has no target");
  std::vector<size_t> deferred;  // local targets skipped for overflow: the last resort
  auto overflowed = [&](const std::string& why) {
    ++st->overflowed;
    metrics_.Add(series::kOverflow, Labels({{"route", route.name}, {"reason", why}}));
  };
  auto done = [&](const Target& t, Result<backend::Embeddings> e) {
    metrics_.Add(series::kRequests, Labels({{"route", route.name},
                                            {"target", t.Label()},
                                            {"outcome", e ? "ok" : CodeLabel(e.error().code)}}));
    return e;
  };
  // The targets in listed order; local_first puts the local ones first, as for chat.
  std::vector<size_t> order(route.targets.size());
  std::iota(order.begin(), order.end(), 0);
  if (route.policy == Policy::kLocalFirst)
    std::stable_partition(order.begin(), order.end(), [&](size_t i) { return route.targets[i].local(); });
  for (size_t i : order) {
    const Target& t = route.targets[i];
    backend::EmbeddingRequest er = r;
    er.model = t.model;
    if (t.local()) {
      // The same overflow rule as a generation's: the vectors' predicted
      // time against the route's SLO, from the embedding work queued here.
      if (route.policy == Policy::kLocalFirst && has_remote) {
        const auto f = local_.PredictEmbed(er);
        const char* why = f.queue_full ? "queue_full"
                          : route.ttft_slo_s > 0 && f.seconds > route.ttft_slo_s
                              ? (f.loaded ? "ttft_slo" : "cold_model")
                              : nullptr;
        if (why) {
          overflowed(why);
          deferred.push_back(i);
          continue;
        }
      }
      auto e = local_.Embed(er, cancelled);
      if (e) return done(t, std::move(e));
      last = e.error();
      if (e.error().code == ErrorCode::kBusy && has_remote) overflowed("queue_full");
    } else if (RemoteBackend* up = Upstream(t.upstream); up && up->breaker().Allow()) {
      auto e = up->Embed(er, cancelled);
      if (e) {
        up->breaker().Success();
        return done(t, std::move(e));
      }
      up->breaker().Failure();
      last = e.error();
    }
    if (SameOnEveryTarget(last) || last.code == ErrorCode::kAborted) return done(t, last);
  }
  // Every other target failed: slow local vectors beat none.
  for (size_t i : deferred) {
    backend::EmbeddingRequest er = r;
    er.model = route.targets[i].model;
    auto e = local_.Embed(er, cancelled);
    if (e) return done(route.targets[i], std::move(e));
    last = e.error();
  }
  metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", "none"}, {"outcome", "failed"}}));
  return last;
}

std::vector<backend::ModelCard> Router::ListModels() {
  std::vector<backend::ModelCard> out = local_.ListModels();
  for (const std::string& name : route_order_) out.push_back(backend::ModelCard{.name = name});
  return out;
}

Result<backend::Loaded> Router::Load(const std::string& model, std::optional<double> keep_alive_s) {
  RouteState* st = Find(model);
  if (!st) return local_.Load(model, keep_alive_s);
  for (const Target& t : st->config.targets)
    if (t.local()) return local_.Load(t.model, keep_alive_s);
  return backend::Loaded{.model = model};
}

Result<int> Router::CountPromptTokens(const backend::GenerationRequest& r) {
  RouteState* st = Find(r.model);
  if (!st) return local_.CountPromptTokens(r);
  for (const Target& t : st->config.targets)
    if (t.local()) return local_.CountPromptTokens(TargetStarter::ForTarget(r, t));
  return MakeError(ErrorCode::kInvalidArgument,
                   "route '" + r.model + "' has no local model to count tokens with (its targets are upstreams)");
}

}  // namespace hone::route
