#include "route/router.h"

#include <algorithm>
#include <numeric>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "route/routed_completion.h"

namespace hone::route {
namespace {

using serve::Clock;
using Dur = std::chrono::duration<double>;

// An upper bound on the prompt's tokens for any byte-level tokenizer: one
// token per byte, plus a few per message for the template's role markers.
int64_t PromptTokenBound(const serve::GenerationRequest& r) {
  int64_t n = 0;
  for (const serve::Message& m : r.messages) {
    n += static_cast<int64_t>(m.content.size()) + 8;
    for (const serve::ToolCall& c : m.tool_calls) n += static_cast<int64_t>(c.name.size() + c.arguments.size()) + 8;
  }
  for (const std::string& p : r.prompts) n += static_cast<int64_t>(p.size()) + 2;
  for (const serve::Tool& t : r.tools)
    n += static_cast<int64_t>(t.name.size() + t.description.size() + t.parameters.size()) + 16;
  return n + 16;
}

std::string PromptText(const serve::GenerationRequest& r) {
  std::string text;
  for (const serve::Message& m : r.messages) text += m.content + "\n";
  for (const std::string& p : r.prompts) text += p;
  return text;
}


bool Stoppable(const Error& e) {
  // The request itself is wrong, or names nothing: no other target will do better.
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kNotFound;
}

}  // namespace

Router::Router(RouterConfig config, serve::LocalBackend& local, std::unique_ptr<Spend> spend)
    : local_(local), spend_(std::move(spend)), rng_(std::random_device{}()) {
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
    if (r.canary) {
      st->canary = std::make_unique<Canary>(r.name, *r.canary, spend_ ? &spend_->ledger() : nullptr, now_unix);
      st->candidate_route = std::make_unique<RouteConfig>(r);
      st->candidate_route->targets.insert(st->candidate_route->targets.begin(), r.canary->target);
      st->candidate_route->policy = Policy::kFailover;
      st->shadow_route = std::make_unique<RouteConfig>(r);
      st->shadow_route->targets = {r.canary->target};
      st->shadow_route->policy = Policy::kFailover;
    }
    st->config = std::move(r);
    routes_[route_order_.back()] = std::move(st);
  }
}

Router::~Router() {
  shadows_stop_ = true;
  while (shadows_in_flight_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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

RemoteBackend* Router::Upstream(const std::string& name) const {
  auto it = upstreams_.find(name);
  return it == upstreams_.end() ? nullptr : it->second.get();
}

bool Router::CanContinue(const Target& t) const {
  if (t.local()) return true;
  RemoteBackend* up = Upstream(t.upstream);
  return up && up->config().continuation;
}

std::vector<size_t> Router::Order(const RouteConfig& r, const serve::GenerationRequest& req, PromptBlocks* blocks,
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
        c.local_ttft_s = local_.Predict(ForTarget(req, t)).load.ttft_s;
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

serve::GenerationRequest Router::ForTarget(const serve::GenerationRequest& r, const Target& t) const {
  serve::GenerationRequest out = r;
  out.model = t.model;
  return out;
}

Result<Router::TargetTry> Router::TryTarget(const RouteConfig& route, const Target& t,
                                            const serve::GenerationRequest& in, Clock::time_point deadline,
                                            const serve::LocalBackend::Forecast* forecast, bool* budget_refused) {
  serve::GenerationRequest r = ForTarget(in, t);
  const std::string target = t.Label();
  TargetTry out;
  if (spend_) {
    Price price;
    int64_t prompt_bound = 0;
    int max_tokens = 0;
    if (t.local()) {
      // Local answers are never refused by a budget; their cost (an energy
      // rate, 0 by default) still counts when they settle.
      price = {spend_->config().local_price_input_per_m, spend_->config().local_price_input_per_m,
               spend_->config().local_price_output_per_m};
    } else if (RemoteBackend* up = Upstream(t.upstream)) {
      price = {up->config().price_input_per_m, up->config().price_cached_input_per_m,
               up->config().price_output_per_m};
      prompt_bound = PromptTokenBound(r);
      max_tokens = r.max_tokens >= 0 ? r.max_tokens : spend_->reserve_max_tokens();
      // The reservation holds for max_tokens: the upstream is held to it too.
      if (r.max_tokens < 0 && !price.free()) r.max_tokens = max_tokens;
    }
    auto hold = spend_->Reserve(route.name, t.upstream, t.model, in.tenant, price, prompt_bound, max_tokens);
    if (!hold) {
      if (budget_refused && hold.error().code == ErrorCode::kRateLimited) *budget_refused = true;
      metrics_.Add(series::kAttempts, Labels({{"route", route.name}, {"target", target}, {"outcome", "budget"}}));
      return hold.error();
    }
    out.hold = std::move(*hold);
    r.ledger_id = out.hold->id;
  }
  // Whatever fails below cost nothing: the hold goes back.
  auto release = [&] {
    if (out.hold) spend_->Release(*out.hold);
  };
  if (t.local()) {
    out.attempts = 1;
    if (forecast && forecast->loaded) out.predicted_ttft_s = forecast->load.ttft_s;
    auto c = local_.Start(r, forecast ? forecast->prepared : nullptr);
    if (!c) {
      release();
      metrics_.Add(
          series::kAttempts,
          Labels({{"route", route.name}, {"target", target}, {"outcome", CodeLabel(c.error().code)}}));
      return c.error();
    }
    out.completion = std::move(*c);
    return out;
  }
  RemoteBackend* up = Upstream(t.upstream);
  if (!up) {
    release();
    return MakeError(ErrorCode::kInternal, "no upstream '" + t.upstream + "'");
  }
  Error last{ErrorCode::kUpstream, "upstream '" + t.upstream + "' was not tried"};
  KeyQueue::Ticket ticket;  // the request's place in the upstream's key queue, kept across attempts
  for (int attempt = 1; attempt <= route.retry.max_attempts; ++attempt) {
    if (!up->breaker().Allow()) {
      Error e = MakeError(ErrorCode::kUnavailable, "upstream '" + t.upstream + "': circuit breaker open");
      e.retry_after_s = static_cast<int>(std::ceil(std::max(1.0, up->breaker().RetryAfter())));
      metrics_.Add(series::kAttempts,
                   Labels({{"route", route.name}, {"target", target}, {"outcome", "breaker_open"}}));
      release();
      return e;
    }
    ++out.attempts;
    AttemptInfo info;
    auto c = up->StartAttempt(r, &info, deadline, &ticket);
    if (!info.key_fingerprint.empty())
      metrics_.Add(series::kKeyRequests, Labels({{"upstream", t.upstream},
                                                 {"key", info.key_fingerprint},
                                                 {"outcome", OutcomeName(info.outcome)}}));
    if (c) {
      out.completion = std::move(*c);
      return out;
    }
    last = c.error();
    if (last.code == ErrorCode::kAborted) break;  // the client left: nothing to retry for
    metrics_.Add(series::kAttempts,
                 Labels({{"route", route.name}, {"target", target}, {"outcome", OutcomeName(info.outcome)}}));
    if (Stoppable(last)) break;
    if (c.error().code == ErrorCode::kBusy && info.outcome == Outcome::kOk) break;  // at max_concurrent
    // A bad key (401/403, now revoked) or a rate-limited one (429, now
    // cooling) is not the upstream's failure and costs no attempt: the
    // request goes back to its place in the key queue, which hands it the
    // next usable key at the upstream's pace, until the route's deadline.
    // (Counting 429s as attempts made a storm give up seconds into it.)
    if (info.no_key) break;  // the queue's deadline passed, or every key is revoked
    const bool key_fault = (info.outcome == Outcome::kAuth && !up->keys().AllRevoked()) ||
                           (info.outcome == Outcome::kRateLimited && !up->keys().empty());
    if (key_fault) {
      metrics_.Add(series::kRetries,
                   Labels({{"route", route.name}, {"target", target}, {"reason", "next_key"}}));
      --attempt;
      if (info.outcome == Outcome::kAuth && out.attempts > 16) break;
      continue;
    }
    if (!Retryable(info.outcome) || info.outcome == Outcome::kAuth || attempt == route.retry.max_attempts)
      break;
    double wait;
    {
      std::lock_guard<std::mutex> lock(rng_mu_);
      wait = BackoffSeconds(route.retry, attempt, last.retry_after_s, rng_);
    }
    if (Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(wait)) > deadline) break;
    metrics_.Add(series::kRetries,
                 Labels({{"route", route.name}, {"target", target}, {"reason", OutcomeName(info.outcome)}}));
    // The backoff in slices: a client that leaves meanwhile ends it.
    const auto wake = Clock::now() + std::chrono::duration_cast<Clock::duration>(Dur(wait));
    while (Clock::now() < wake) {
      if (r.cancelled && r.cancelled()) {
        release();
        return MakeError(ErrorCode::kAborted, "the client left during a retry's backoff");
      }
      std::this_thread::sleep_for(
          std::min<Clock::duration>(wake - Clock::now(), std::chrono::milliseconds(50)));
    }
  }
  release();
  return last;
}

void Router::SettleSpend(SpendHold& hold, const serve::GenerationRequest& r, serve::Usage usage,
                         const std::string& outcome) {
  if (!spend_ || hold.done) return;
  if (usage.prompt_tokens == 0 && (!r.messages.empty() || !r.prompts.empty())) {
    // The target reported no usage (a stream cut short): count the prompt here.
    usage.estimated = true;
    const std::string text = PromptText(r);
    std::optional<int> n;
    if (const RouteState* st = Find(hold.route))
      for (const Target& t : st->config.targets)
        if (t.local() && !n) n = local_.CountTokens(t.model, text);
    usage.prompt_tokens = n ? *n : static_cast<int>(text.size() / 4 + 1);
  }
  spend_->Settle(hold, usage, usage.estimated, outcome);
}

Result<std::unique_ptr<serve::Completion>> Router::Start(const serve::GenerationRequest& r) {
  RouteState* st = Find(r.model);
  if (!st) return local_.Start(r);  // not a route: a local model, as without a router
  // A canary picks the arm first: the cache is kept per arm too.
  const RouteConfig* route = &st->config;
  AnswerEnd on_end;
  std::string arm_key;
  if (st->canary) {
    const auto arm = st->canary->Pick(ConversationKey(r), CanaryNow());
    Canary* canary = st->canary.get();
    const bool candidate = arm == Canary::Arm::kCandidate;
    if (candidate) route = st->candidate_route.get();
    arm_key = candidate ? "|candidate" : "|baseline";
    // A candidate answer served by any other target is the candidate's failure.
    on_end = [canary, candidate](std::optional<double> ttft, double total, bool error, size_t target) {
      canary->Record(candidate, ttft, total, error || (candidate && target != 0));
    };
    if (arm == Canary::Arm::kShadow) {
      StartShadow(st, r);
      on_end = [canary](std::optional<double> ttft, double total, bool error, size_t) {
        canary->Record(false, ttft, total, error);
      };
    }
  }
  auto start = [&]() -> Result<std::unique_ptr<serve::Completion>> {
    auto c = StartRoute(st, *route, r, on_end);
    // A refusal that is the request's own (bad, unknown, over budget, client
    // gone) says nothing about the arm; the rest is the arm failing.
    const ErrorCode code = c ? ErrorCode::kInternal : c.error().code;
    if (!c && on_end && code != ErrorCode::kAborted && code != ErrorCode::kInvalidArgument &&
        code != ErrorCode::kNotFound && code != ErrorCode::kRateLimited)
      on_end(std::nullopt, 0, true, 0);
    return c;
  };
  const RouteConfig::CacheMode mode = st->config.cache;
  const bool cacheable = cache_ && !r.no_cache && mode != RouteConfig::CacheMode::kOff &&
                         (mode == RouteConfig::CacheMode::kAll || Deterministic(r));
  if (!cacheable) return start();
  std::string key = CacheKey(r);
  if (key.empty()) return start();
  key += arm_key;
  if (auto hit = cache_->Get(key)) {
    ++st->requests;
    ++st->cache_hits;
    metrics_.Add(series::kCache, Labels({{"route", st->config.name}, {"result", "hit"}}));
    return std::unique_ptr<serve::Completion>(
        std::make_unique<CachedCompletion>(std::move(hit), "route=" + st->config.name + " cache=hit"));
  }
  ++st->cache_misses;
  metrics_.Add(series::kCache, Labels({{"route", st->config.name}, {"result", "miss"}}));
  auto started = start();
  if (!started) return started;
  return std::unique_ptr<serve::Completion>(
      std::make_unique<RecordingCompletion>(std::move(*started), cache_.get(), key));
}

void Router::StartShadow(RouteState* st, const serve::GenerationRequest& r) {
  // At most a few copies at once: a slow candidate must not pile up threads.
  if (shadows_in_flight_.fetch_add(1) >= 8) {
    --shadows_in_flight_;
    return;
  }
  serve::GenerationRequest copy = r;
  copy.cancelled = [this] { return shadows_stop_.load(); };
  copy.no_cache = true;
  copy.tenant.clear();  // a copy the client never sees must not use up the client's own budget
  std::thread([this, st, copy = std::move(copy)] {
    Canary* canary = st->canary.get();
    AnswerEnd on_end = [canary](std::optional<double> ttft, double total, bool error, size_t) {
      canary->Record(true, ttft, total, error);
    };
    auto c = StartRoute(st, *st->shadow_route, copy, on_end, /*count=*/false);
    if (!c) {
      const ErrorCode code = c.error().code;
      if (code != ErrorCode::kAborted && code != ErrorCode::kInvalidArgument && code != ErrorCode::kNotFound &&
          code != ErrorCode::kRateLimited)
        on_end(std::nullopt, 0, true, 0);
    } else {
      // Read to the end and discard: only the numbers count.
      for (;;) {
        if (shadows_stop_) (*c)->Cancel();
        if ((*c)->Next(Clock::now() + std::chrono::milliseconds(100)).kind == serve::CompletionEvent::Kind::kDone)
          break;
      }
    }
    c = MakeError(ErrorCode::kAborted, "done");  // ends the completion before the count drops
    --shadows_in_flight_;
  }).detach();
}

Result<std::unique_ptr<serve::Completion>> Router::StartRoute(RouteState* st, const RouteConfig& route,
                                                              const serve::GenerationRequest& r, AnswerEnd on_end,
                                                              bool count) {
  if (count) ++st->requests;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(Dur(route.retry.deadline_s));
  PromptBlocks blocks;
  std::unique_ptr<ReplicaPicker::Pending> pending;
  std::vector<size_t> order = Order(route, r, &blocks, &pending);
  std::vector<size_t> deferred;  // local targets skipped for overflow: the last resort
  std::string overflow;
  std::vector<std::string> failures;
  int attempts = 0;
  bool all_unavailable = true;  // every target refused with kUnavailable or kRateLimited
  bool any_rate_limited = false;
  std::optional<ErrorCode> same_code;  // set while every failure had this code
  bool mixed = false;
  int retry_after = 0;
  const bool has_remote =
      std::any_of(route.targets.begin(), route.targets.end(), [](auto& t) { return !t.local(); });
  auto finish = [&](size_t i, TargetTry&& tt) -> std::unique_ptr<serve::Completion> {
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
    auto rc = std::make_unique<RoutedCompletion>(this, &route, r, i, std::move(rest), std::move(tt), start, note);
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
      forecast = local_.Predict(ForTarget(r, t));
      const serve::LocalBackend::Forecast& f = *forecast;
      if (!f.loaded) admitting.unlock();  // a cold load must not hold up the route
      std::string why;
      if (f.load.queue_full)
        why = "queue_full";
      else if (route.ttft_slo_s > 0 && f.load.ttft_s > route.ttft_slo_s)
        why = f.loaded ? "ttft_slo" : "cold_model";
      if (!why.empty()) {
        overflow = why;
        if (count) ++st->overflowed;
        metrics_.Add(series::kOverflow, Labels({{"route", route.name}, {"reason", why}}));
        deferred.push_back(i);
        continue;
      }
    }
    bool budget_refused = false;
    auto tt = TryTarget(route, t, r, deadline, forecast ? &*forecast : nullptr, &budget_refused);
    if (admitting) admitting.unlock();  // queued (or refused): the next forecast sees it
    if (tt) return finish(i, std::move(*tt));
    const Error& e = tt.error();
    if (Stoppable(e) || e.code == ErrorCode::kAborted) {
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
    if (e.code == ErrorCode::kRateLimited)
      any_rate_limited = true;
    else if (e.code != ErrorCode::kUnavailable)
      all_unavailable = false;
    if (e.retry_after_s > 0)
      retry_after = retry_after ? std::min(retry_after, e.retry_after_s) : e.retry_after_s;
    failures.push_back(t.Label() + ": " + e.message);
    if (same_code && *same_code != e.code) mixed = true;
    same_code = e.code;
    ++attempts;
  }
  // Every other target failed: a slow local answer beats none.
  for (size_t i : deferred) {
    auto tt = TryTarget(route, route.targets[i], r, deadline);
    if (tt) {
      overflow += "+last_resort";
      return finish(i, std::move(*tt));
    }
    failures.push_back(route.targets[i].Label() + ": " + tt.error().message);
    all_unavailable = all_unavailable && tt.error().code == ErrorCode::kUnavailable;
  }
  std::string why = "route '" + route.name + "': no target could serve the request";
  for (const std::string& f : failures) why += "; " + f;
  Error e = MakeError(!mixed && same_code ? *same_code
                      : !all_unavailable  ? ErrorCode::kUpstream
                      : any_rate_limited  ? ErrorCode::kRateLimited
                                          : ErrorCode::kUnavailable,
                      why);
  e.retry_after_s = std::max(1, retry_after);
  metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", "none"}, {"outcome", "failed"}}));
  return e;
}

Result<serve::Embeddings> Router::Embed(const serve::EmbeddingRequest& r,
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
  auto done = [&](const Target& t, Result<serve::Embeddings> e) {
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
    serve::EmbeddingRequest er = r;
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
    if (Stoppable(last) || last.code == ErrorCode::kAborted) return done(t, last);
  }
  // Every other target failed: slow local vectors beat none.
  for (size_t i : deferred) {
    serve::EmbeddingRequest er = r;
    er.model = route.targets[i].model;
    auto e = local_.Embed(er, cancelled);
    if (e) return done(route.targets[i], std::move(e));
    last = e.error();
  }
  metrics_.Add(series::kRequests, Labels({{"route", route.name}, {"target", "none"}, {"outcome", "failed"}}));
  return last;
}

std::vector<serve::ModelCard> Router::ListModels() {
  std::vector<serve::ModelCard> out = local_.ListModels();
  for (const std::string& name : route_order_) out.push_back(serve::ModelCard{.name = name});
  return out;
}

Result<std::string> Router::Load(const std::string& model, std::optional<double> keep_alive_s) {
  RouteState* st = Find(model);
  if (!st) return local_.Load(model, keep_alive_s);
  for (const Target& t : st->config.targets)
    if (t.local()) return local_.Load(t.model, keep_alive_s);
  return model;
}

Result<int> Router::CountPromptTokens(const serve::GenerationRequest& r) {
  RouteState* st = Find(r.model);
  if (!st) return local_.CountPromptTokens(r);
  for (const Target& t : st->config.targets)
    if (t.local()) return local_.CountPromptTokens(ForTarget(r, t));
  return MakeError(ErrorCode::kInvalidArgument,
                   "route '" + r.model + "' has no local model to count tokens with (its targets are upstreams)");
}

}  // namespace hone::route
