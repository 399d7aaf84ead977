#include "serve/forecaster.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "serve/scheduler_slot.h"

namespace hone::serve {

void Forecaster::RecordStep(double seconds, int prefill_tokens, int generating) {
  constexpr double kAlpha = 0.2;  // EWMA weight of the newest step
  std::lock_guard<std::mutex> lock(mu_);
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
    const double base = generating > 0         ? StepSecondsLocked(generating)
                        : step_s_by_n_.empty() ? 0
                                               : StepSecondsLocked(1);
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

void Forecaster::RecordAnswer(int completion_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  avg_completion_ += 0.2 * (completion_tokens - avg_completion_);
}

void Forecaster::PublishSlots(std::vector<SlotView> slots) {
  std::lock_guard<std::mutex> lock(mu_);
  view_.swap(slots);
}

double Forecaster::prefill_s_per_token() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefill_s_per_token_;
}

double Forecaster::StepSecondsLocked(int n) const {
  // The measured step nearest in size, scaled by ~10% a sequence (decode on a
  // CPU is memory-bound: one more stream costs a little, not a whole step).
  int best = -1;
  for (int m = 1; m < static_cast<int>(step_s_by_n_.size()); ++m) {
    if (step_s_by_n_[m] > 0 && (best < 0 || std::abs(m - n) < std::abs(best - n))) best = m;
  }
  if (best < 0) return step_s_;
  return step_s_by_n_[best] * (1 + 0.1 * (n - best));
}

double Forecaster::WaitLocked(const Queue& q, const std::vector<double>& frees, size_t prompt_tokens,
                              double step_s) const {
  // A job admitted since the last publish holds a slot the view does not show yet.
  const int free_slots = std::max(0, q.slots - std::max(static_cast<int>(frees.size()), q.active));
  const int ahead = q.waiting;  // each takes a slot before this request does
  if (ahead < free_slots) return 0;
  const int need = ahead - free_slots + 1;  // slot releases this request waits for
  const double avg_prompt = q.waiting_prompts.empty()
                                ? prompt_tokens
                                : std::accumulate(q.waiting_prompts.begin(), q.waiting_prompts.end(), 0.0) /
                                      q.waiting_prompts.size();
  const double job_s = avg_prompt * prefill_s_per_token_ + avg_completion_ * step_s;
  if (need <= static_cast<int>(frees.size())) return frees[need - 1];
  const int waves = (need - static_cast<int>(frees.size()) + q.slots - 1) / q.slots;
  return (frees.empty() ? 0 : frees.back()) + waves * job_s;
}

LoadForecast Forecaster::Predict(const Queue& q, const std::vector<engine::Token>& prompt, int max_tokens,
                                 const std::string& scope, const Cached& in_cache) const {
  LoadForecast f;
  f.slots = q.slots;
  f.active = q.active;
  f.waiting = q.waiting;
  f.queue_full = q.full;
  std::lock_guard<std::mutex> lock(mu_);
  f.prefill_tps = 1.0 / prefill_s_per_token_;
  // Steps while this request waits and prefills carry every busy slot.
  const double step_s = StepSecondsLocked(std::min(q.slots, f.active + f.waiting + 1));
  f.step_s = step_s;
  // The best cached prefix in any slot: the slot itself, or a copy from it.
  size_t cached = 0;
  for (const SlotView& s : view_) {
    if (!s.last) continue;
    const size_t common = CommonPrefix(s.last->prompt, prompt);
    if (s.last->cache_scope == scope)
      cached = std::max(cached, common);
    else if (in_cache.shared)
      cached = std::max(cached, in_cache.shared->Reusable(prompt, common));
  }
  // A longer prefix in the prompt cache, when restoring it beats prefilling
  // the difference (the scheduler decides so too, in WorthRestoring).
  if (in_cache.match.tokens > cached) {
    const double restore_s = in_cache.match.entry_tokens * in_cache.restore_s_per_token;
    if (restore_s < (in_cache.match.tokens - cached) * prefill_s_per_token_) {
      cached = in_cache.match.tokens;
      f.cache_tier = in_cache.match.tier;
      f.restore_s = restore_s;
    }
  }
  cached = std::min(cached, prompt.empty() ? 0 : prompt.size() - 1);
  f.cached_tokens = static_cast<int>(cached);
  f.uncached_tokens = static_cast<int>(prompt.size() - cached);
  // When each busy slot frees up: its remaining prefill, then its remaining
  // answer (max_tokens, or the average answer length) at one token a step.
  std::vector<double> frees;
  for (const SlotView& s : view_) {
    if (!s.job) continue;
    const Job& j = *s.job;
    const double expect =
        j.max_tokens >= 0 ? j.max_tokens : std::max<double>(avg_completion_, s.generated + 1);
    const double prefill = (j.prompt.size() - std::min(s.prefilled, j.prompt.size())) * prefill_s_per_token_;
    frees.push_back(prefill + std::max(1.0, expect - s.generated) * step_s);
  }
  std::sort(frees.begin(), frees.end());
  const double wait = WaitLocked(q, frees, prompt.size(), step_s);
  // This prompt's prefill: in chunks riding with the others' decode steps
  // when slots are busy, alone otherwise.
  const bool shared = !frees.empty() || q.waiting > 0;
  const double own = shared ? std::ceil(f.uncached_tokens / static_cast<double>(q.prefill_chunk)) * step_s +
                                  f.uncached_tokens * prefill_s_per_token_
                            : f.uncached_tokens * prefill_s_per_token_;
  f.wait_s = wait;
  f.ttft_s = wait + f.restore_s + own + step_s;  // and the step that samples the first token
  (void)max_tokens;
  return f;
}

}  // namespace hone::serve
