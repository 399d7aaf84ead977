// The router's operating side, apart from the request path in router.cc:
// reloading keys, the upstream health checks, the /hone/routes and /metrics
// views, and the canary commands.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "route/router.h"

namespace hone::route {
namespace {

using backend::Clock;
using Dur = std::chrono::duration<double>;

// A URL as /hone/routes may show it: no user:password@, no query string
// (either can carry a credential).
std::string PublicUrl(std::string url) {
  if (auto q = url.find('?'); q != std::string::npos) url.erase(q);
  const size_t scheme = url.find("://");
  const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t at = url.find('@', host), slash = url.find('/', host);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) url.erase(host, at + 1 - host);
  return url;
}

}  // namespace

int Router::UpstreamConcurrency() const {
  long n = 0;
  for (const auto& [name, up] : upstreams_) n += up->config().max_concurrent;
  return static_cast<int>(std::min(n, 100000L));
}

int Router::ReloadKeys(const RouterConfig& fresh) {
  int n = 0;
  for (const UpstreamConfig& u : fresh.upstreams) {
    if (RemoteBackend* up = Upstream(u.name)) {
      up->ReloadKeys(u.keys);
      ++n;
    }
  }
  return n;
}

void Router::WatchReload(std::atomic<bool>* pending, std::function<Result<RouterConfig>()> load) {
  reload_pending_ = pending;
  reload_load_ = std::move(load);
}

void Router::StartHealthChecks() {
  const bool canaries =
      std::any_of(routes_.begin(), routes_.end(), [](auto& kv) { return kv.second->arms != nullptr; });
  if ((upstreams_.empty() && !spend_ && !canaries) || health_.joinable()) return;
  health_ = std::thread([this] { HealthLoop(); });
}

void Router::HealthLoop() {
  std::map<std::string, Clock::time_point> next, next_load;
  for (auto& [name, up] : upstreams_) next[name] = next_load[name] = Clock::now();
  std::unique_lock<std::mutex> lock(health_mu_);
  while (!stopping_) {
    auto soonest = Clock::now() + std::chrono::seconds(1);
    if (spend_) {
      lock.unlock();
      spend_->Tick();  // frees reservations that processes which died left behind
      lock.lock();
    }
    for (auto& [name, st] : routes_)
      if (st->arms) st->arms->canary().Tick(CanaryNow());  // judges each gray release's step
    if (reload_pending_ && reload_pending_->exchange(false)) {
      lock.unlock();
      auto fresh = reload_load_();
      if (!fresh)
        std::fprintf(stderr, "[hone] config reload failed, keys unchanged: %s\n",
                     fresh.error().message.c_str());
      else
        std::fprintf(stderr, "[hone] config reloaded: keys of %d upstream(s) back in rotation\n",
                     ReloadKeys(*fresh));
      lock.lock();
    }
    // Replicas' load, every load_interval (1 s): the affinity policy's view.
    for (auto& [name, up] : upstreams_) {
      if (!up->config().replica) continue;
      if (Clock::now() < next_load[name]) {
        soonest = std::min(soonest, next_load[name]);
        continue;
      }
      lock.unlock();
      auto text = up->FetchMetrics();
      if (picker_.Update(name, text.ok(), text ? *text : text.error().message)) {
        if (picker_.Reachable(name))
          std::fprintf(stderr, "[hone] replica '%s' is back in rotation\n", name.c_str());
        else
          std::fprintf(stderr, "[hone] replica '%s' leaves the rotation: %s\n", name.c_str(),
                       text ? "it is draining" : text.error().message.c_str());
      }
      lock.lock();
      next_load[name] =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(up->config().load_interval_s));
      soonest = std::min(soonest, next_load[name]);
    }
    for (auto& [name, up] : upstreams_) {
      if (Clock::now() < next[name]) {
        soonest = std::min(soonest, next[name]);
        continue;
      }
      lock.unlock();
      // A cheap GET; an open breaker whose cooldown passed takes it as its probe.
      Status s = up->CheckHealth();
      if (s.ok()) {
        if (up->breaker().state() != BreakerState::kClosed && up->breaker().Allow()) up->breaker().Success();
      } else {
        std::fprintf(stderr, "[hone] health check of upstream '%s' failed: %s\n", name.c_str(),
                     s.error().message.c_str());
        up->breaker().Failure();
      }
      lock.lock();
      next[name] =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(up->config().health_interval_s));
      soonest = std::min(soonest, next[name]);
    }
    health_cv_.wait_until(lock, soonest, [&] { return stopping_; });
  }
}

std::string Router::RoutesJson() const {
  using nlohmann::json;
  json routes = json::array();
  long total = 0, overflowed = 0;
  for (const std::string& name : route_order_) {
    const RouteState& st = *routes_.at(name);
    total += st.requests.load();
    overflowed += st.overflowed.load();
    json targets = json::array();
    for (const Target& t : st.config.targets) {
      json tj = {{"target", t.Label()}, {"local", t.local()}};
      if (RemoteBackend* up = Upstream(t.upstream)) {
        tj["breaker"] = BreakerStateName(up->breaker().state());
        tj["breaker_retry_after_s"] = up->breaker().RetryAfter();
        tj["in_flight"] = up->in_flight();
        tj["max_concurrent"] = up->config().max_concurrent;
        tj["base_url"] = PublicUrl(up->config().base_url);
        tj["continuation"] = up->config().continuation;
        json keys = json::array();
        for (const KeyView& k : up->keys().Snapshot()) {
          json kj = {{"fingerprint", k.fingerprint}, {"health", KeyHealthName(k.health)}, {"uses", k.uses}};
          if (k.health == KeyHealth::kCooling) kj["available_in_s"] = k.available_in_s;
          if (!k.why.empty()) kj["why"] = k.why;
          keys.push_back(kj);
        }
        tj["keys"] = keys;
        const KeyQueue::View q = up->key_queue().Snapshot();
        tj["key_queue"] = {{"waiting", q.waiting}, {"retry_after_s", q.retry_after_s}};
      }
      targets.push_back(tj);
    }
    json cache = {{"mode", st.config.cache == RouteConfig::CacheMode::kOff   ? "off"
                           : st.config.cache == RouteConfig::CacheMode::kAll ? "all"
                                                                             : "deterministic"},
                  {"enabled", cache_ != nullptr},
                  {"hits", st.cache_hits.load()},
                  {"misses", st.cache_misses.load()},
                  {"hit_rate", st.cache_hits + st.cache_misses
                                   ? double(st.cache_hits) / double(st.cache_hits + st.cache_misses)
                                   : 0.0}};
    routes.push_back({{"name", name},
                      {"policy", PolicyName(st.config.policy)},
                      {"cache", cache},
                      {"canary", st.arms ? st.arms->canary().Json(CanaryNow()) : json(nullptr)},
                      {"ttft_slo_s", st.config.ttft_slo_s},
                      {"requests", st.requests.load()},
                      {"overflowed", st.overflowed.load()},
                      {"overflow_rate", st.requests ? double(st.overflowed) / st.requests : 0.0},
                      {"targets", targets}});
  }
  json out = {{"routes", routes}, {"overflow_rate", total ? double(overflowed) / total : 0.0}};
  if (json replicas = picker_.Json(); !replicas.empty()) out["replicas"] = std::move(replicas);
  if (cache_) {
    const ResponseCache::Stats s = cache_->stats();
    out["cache"] = {{"entries", s.entries},
                    {"bytes", s.bytes},
                    {"max_bytes", cache_->max_bytes()},
                    {"ttl_s", cache_->ttl_s()},
                    {"hits", s.hits},
                    {"misses", s.misses},
                    {"stores", s.stores},
                    {"evictions", s.evictions},
                    {"expired", s.expired},
                    {"hit_rate", s.hits + s.misses ? double(s.hits) / double(s.hits + s.misses) : 0.0}};
  }
  return out.dump(2);
}

void Router::RenderMetrics(std::string* out) const {
  metrics_.Render(out);
  if (spend_) spend_->RenderMetrics(out);
  Canary::Families canaries;  // each family's lines over all routes, so each is written once
  for (const std::string& name : route_order_)
    if (const RouteState& st = *routes_.at(name); st.arms) st.arms->canary().RenderMetrics(&canaries);
  for (const auto& [family, lines] : canaries) *out += Canary::FamilyHeaderOf(family) + lines;
  if (cache_) {
    const ResponseCache::Stats s = cache_->stats();
    *out += serve::FamilyHeader("hone_cache_bytes", "gauge", "Bytes held by the response cache") +
            "hone_cache_bytes " + std::to_string(s.bytes) + "\n";
    *out += serve::FamilyHeader("hone_cache_entries", "gauge", "Answers held by the response cache") +
            "hone_cache_entries " + std::to_string(s.entries) + "\n";
    *out += serve::FamilyHeader("hone_cache_evictions_total", "counter",
                                "Answers evicted from the response cache") +
            "hone_cache_evictions_total " + std::to_string(s.evictions) + "\n";
  }
  *out += serve::FamilyHeader("hone_route_breaker_state", "gauge",
                              "Circuit breaker per upstream: 0 closed, 1 half-open, 2 open");
  for (const auto& [name, up] : upstreams_) {
    const BreakerState s = up->breaker().state();
    *out += "hone_route_breaker_state{" + Labels({{"upstream", name}}) + "} " +
            std::to_string(s == BreakerState::kClosed     ? 0
                           : s == BreakerState::kHalfOpen ? 1
                                                          : 2) +
            "\n";
  }
  *out += serve::FamilyHeader("hone_route_in_flight", "gauge", "Requests in flight per upstream");
  for (const auto& [name, up] : upstreams_)
    *out += "hone_route_in_flight{" + Labels({{"upstream", name}}) + "} " + std::to_string(up->in_flight()) +
            "\n";
  *out += serve::FamilyHeader("hone_route_key_queue_waiting", "gauge",
                              "Requests waiting per upstream for a usable API key");
  for (const auto& [name, up] : upstreams_)
    *out += "hone_route_key_queue_waiting{" + Labels({{"upstream", name}}) + "} " +
            std::to_string(up->key_queue().waiting()) + "\n";
  std::string replicas;
  for (const auto& [name, up] : upstreams_)
    if (up->config().replica)
      replicas += "hone_route_replica_reachable{" + Labels({{"upstream", name}}) + "} " +
                  (picker_.Reachable(name) ? "1" : "0") + "\n";
  if (!replicas.empty())
    *out += serve::FamilyHeader("hone_route_replica_reachable", "gauge",
                                "1 while a hone replica's last metrics scrape succeeded") +
            replicas;
  *out += serve::FamilyHeader("hone_route_key_healthy", "gauge", "1 while an upstream API key is usable");
  for (const auto& [name, up] : upstreams_)
    for (const KeyView& k : up->keys().Snapshot())
      *out += "hone_route_key_healthy{" + Labels({{"upstream", name}, {"key", k.fingerprint}}) + "} " +
              (k.health == KeyHealth::kOk ? "1" : "0") + "\n";
}

Result<std::string> Router::CanaryCommand(const std::string& route, const std::string& action) {
  RouteState* st = Find(route);
  if (!st) return MakeError(ErrorCode::kNotFound, "no route '" + route + "'");
  if (!st->arms) return MakeError(ErrorCode::kNotFound, "route '" + route + "' has no canary");
  const double now = CanaryNow();
  if (action == "promote") {
    if (Status s = st->arms->canary().Promote(now); !s) return s.error();
  } else if (action == "rollback") {
    if (Status s = st->arms->canary().Rollback("rolled back by an operator", now); !s) return s.error();
  } else if (action != "status") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "action must be status, promote or rollback, not '" + action + "'");
  }
  nlohmann::json j = st->arms->canary().Json(now);
  j["route"] = route;
  return j.dump(2);
}

}  // namespace hone::route
