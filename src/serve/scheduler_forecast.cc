// The scheduler's forecaster: what it measures of each step (prefill rate,
// decode step time by batch size, answer lengths) and the time to first
// token it predicts for a new request from them, the queue, the slots and
// the prompt cache. Measure and Publish run on the scheduler thread;
// Forecast on any (the router's overflow decision, /metrics).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "serve/scheduler.h"
#include "serve/scheduler_slot.h"

namespace hone::serve {

void Scheduler::Measure(double seconds, int prefill_tokens, int generating) {
  constexpr double kAlpha = 0.2;  // EWMA weight of the newest step
  std::lock_guard<std::mutex> lock(view_mu_);
  if (prefill_tokens == 0 && generating > 0) {
    step_s_ += kAlpha * (seconds - step_s_);
    if (step_s_by_n_.size() <= static_cast<size_t>(generating)) step_s_by_n_.resize(generating + 1, 0);
    double& s = step_s_by_n_[generating];
    s = s == 0 ? seconds : s + kAlpha * (seconds - s);
  } else if (prefill_tokens > 0) {
    // A step costs about one decode step (the weights are read once, as for
    // a generating sequence) plus its prompt tokens; a step with prompt tokens
    // only, too. Unless that fixed part is taken out, a conversation's new
    // turn (a few tokens past its cached prefix) makes every prompt token look
    // as dear as a whole step, and the next long prompt's forecast comes out
    // many times too slow (a local_first route then overflows it for nothing).
    const double base = generating > 0 ? StepSeconds(generating) : step_s_by_n_.empty() ? 0 : StepSeconds(1);
    const double prompt_s = std::clamp(seconds - base, 0.0, seconds);
    // Weighted by tokens, not by steps: a short turn slowed by a preemption
    // moves the rate by its few tokens' worth, not by a fifth of the way.
    constexpr double kPrefillWindowTokens = 4096;
    const double keep = std::exp(-prefill_tokens / kPrefillWindowTokens);
    prefill_s_sum_ = prefill_s_sum_ * keep + prompt_s;
    prefill_tokens_sum_ = prefill_tokens_sum_ * keep + prefill_tokens;
    prefill_s_per_token_ = std::max(1e-6, prefill_s_sum_ / prefill_tokens_sum_);
  }
}

double Scheduler::StepSeconds(int n) const {
  // The measured step nearest in size, scaled by ~10% a sequence (decode on a
  // CPU is memory-bound: one more stream costs a little, not a whole step).
  int best = -1;
  for (int m = 1; m < static_cast<int>(step_s_by_n_.size()); ++m) {
    if (step_s_by_n_[m] > 0 && (best < 0 || std::abs(m - n) < std::abs(best - n))) best = m;
  }
  if (best < 0) return step_s_;
  return step_s_by_n_[best] * (1 + 0.1 * (n - best));
}

void Scheduler::Publish() {
  std::vector<SlotView> v;
  v.reserve(slots_.size());
  for (auto& s : slots_) v.push_back({s->job, s->last_job, s->prefilled, s->result.completion_tokens});
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    view_.swap(v);
  }
  // What another hone's router reads to place requests (route/replica_load.h):
  // the wait a new request would have for a slot, and the prefill rate. A
  // router reads them once a second, so busy steps refresh them at most every
  // 100 ms; the step that leaves the model idle always does (no step follows).
  const auto now = Clock::now();
  if (active_.load() > 0 && now - forecast_gauges_at_ < std::chrono::milliseconds(100)) return;
  forecast_gauges_at_ = now;
  const LoadForecast f = Forecast({}, -1);
  metrics_->Set(metric::kSlotWait, name_, f.wait_s);
  metrics_->Set(metric::kPrefillRate, name_, f.prefill_tps);
}

LoadForecast Scheduler::Forecast(const std::vector<engine::Token>& prompt, int max_tokens,
                                  const std::string& scope) const {
  LoadForecast f;
  // Before view_mu_: the prompt cache has its own lock, never taken inside it.
  const CacheMatch in_cache = cache_ && !prompt.empty() ? cache_->Find(scope, prompt) : CacheMatch{};
  const double restore_per_token = cache_ ? cache_->RestoreSecondsPerToken(in_cache.tier) : 0;
  f.slots = opt_.slots;
  std::vector<size_t> waiting_prompts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Under mu_, with the queue: a job is always counted in one of the two.
    f.active = active_.load();
    f.waiting = static_cast<int>(queue_.size());
    for (const Pending& p : queue_) waiting_prompts.push_back(p.job->prompt.size());
    f.queue_full = stopping_ || RoomLocked() <= 0;
  }
  std::lock_guard<std::mutex> lock(view_mu_);
  f.prefill_tps = 1.0 / prefill_s_per_token_;
  // Steps while this request waits and prefills carry every busy slot.
  const double step_s = StepSeconds(std::min(opt_.slots, f.active + f.waiting + 1));
  f.step_s = step_s;
  // The best cached prefix in any slot: the slot itself, or a copy from it.
  size_t cached = 0;
  for (const SlotView& s : view_) {
    if (s.last && s.last->cache_scope == scope) cached = std::max(cached, CommonPrefix(s.last->prompt, prompt));
  }
  // A longer prefix in the prompt cache, when restoring it beats prefilling
  // the difference (the scheduler decides so too, in WorthRestoring).
  if (in_cache.tokens > cached) {
    const double restore_s = in_cache.entry_tokens * restore_per_token;
    if (restore_s < (in_cache.tokens - cached) * prefill_s_per_token_) {
      cached = in_cache.tokens;
      f.cache_tier = in_cache.tier;
      f.restore_s = restore_s;
    }
  }
  cached = std::min(cached, prompt.empty() ? 0 : prompt.size() - 1);
  f.cached_tokens = static_cast<int>(cached);
  f.uncached_tokens = static_cast<int>(prompt.size() - cached);
  // When each busy slot frees up: its remaining prefill, then its remaining
  // answer (max_tokens, or the average answer length) at one token a step.
  auto remaining_answer = [&](const Job& j, int generated) {
    const double expect = j.max_tokens >= 0 ? j.max_tokens : std::max<double>(avg_completion_, generated + 1);
    return std::max(1.0, expect - generated);
  };
  std::vector<double> frees;
  for (const SlotView& s : view_) {
    if (!s.job) continue;
    const double prefill =
        (s.job->prompt.size() - std::min(s.prefilled, s.job->prompt.size())) * prefill_s_per_token_;
    frees.push_back(prefill + remaining_answer(*s.job, s.generated) * step_s);
  }
  std::sort(frees.begin(), frees.end());
  // A job admitted since the last publish holds a slot the view does not show yet.
  const int free_slots = std::max(0, opt_.slots - std::max(static_cast<int>(frees.size()), f.active));
  double wait = 0;
  const int ahead = f.waiting;  // each takes a slot before this request does
  if (ahead >= free_slots) {
    const int need = ahead - free_slots + 1;  // slot releases this request waits for
    const double avg_prompt =
        waiting_prompts.empty()
            ? prompt.size()
            : std::accumulate(waiting_prompts.begin(), waiting_prompts.end(), 0.0) / waiting_prompts.size();
    const double job_s = avg_prompt * prefill_s_per_token_ + avg_completion_ * step_s;
    if (need <= static_cast<int>(frees.size())) {
      wait = frees[need - 1];
    } else {
      const int waves = (need - static_cast<int>(frees.size()) + opt_.slots - 1) / opt_.slots;
      wait = (frees.empty() ? 0 : frees.back()) + waves * job_s;
    }
  }
  // This prompt's prefill: in chunks riding with the others' decode steps
  // when slots are busy, alone otherwise.
  const bool shared = !frees.empty() || ahead > 0;
  const double own = shared
                         ? std::ceil(f.uncached_tokens / static_cast<double>(opt_.prefill_chunk)) * step_s +
                               f.uncached_tokens * prefill_s_per_token_
                         : f.uncached_tokens * prefill_s_per_token_;
  f.wait_s = wait;
  f.ttft_s = wait + f.restore_s + own + step_s;  // and the step that samples the first token
  (void)max_tokens;
  return f;
}

}  // namespace hone::serve
