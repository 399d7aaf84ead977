// The time-to-first-token forecaster of one model's scheduler. The scheduler
// feeds it after each step (its duration, prompt tokens and streams; the
// slots' state; each finished answer's length) and the router reads it
// (Scheduler::Forecast) to decide whether a request overflows before sending
// it. Its own lock: a forecast never waits on a decode step.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/job.h"
#include "serve/prompt_cache.h"
#include "serve/shared_prefixes.h"

namespace hone::serve {

// A new request's predicted time to first token, from what the scheduler knows
// now: the requests ahead of it (waiting, and the slots' remaining prefill and
// generation), this prompt's tokens after the best cached prefix, free slots,
// and prefill and decode rates measured on this machine. The router's
// overflow decision (route/router.h) reads it before sending.
struct LoadForecast {
  double ttft_s = 0;
  double wait_s = 0;                        // of ttft_s, until a slot takes it
  int cached_tokens = 0;                    // of the prompt, in some slot's KV or the prompt cache
  int uncached_tokens = 0;                  // to prefill
  CacheTier cache_tier = CacheTier::kNone;  // where the cached tokens would come from (kNone: a slot)
  double restore_s = 0;                     // of ttft_s, restoring them from that tier
  int waiting = 0, active = 0, slots = 0;
  bool queue_full = false;  // Submit would refuse it now
  double prefill_tps = 0;   // measured prompt tokens per second
  double step_s = 0;        // measured seconds per decode step
};

class Forecaster {
 public:
  // One slot as the last step left it.
  struct SlotView {
    std::shared_ptr<const Job> job;   // running, or null when free
    std::shared_ptr<const Job> last;  // whose prompt the slot's KV holds
    size_t prefilled = 0;
    int generated = 0;
  };
  // The queue as the scheduler saw it, under its own lock.
  struct Queue {
    int slots = 0, prefill_chunk = 1;
    int active = 0, waiting = 0;
    std::vector<size_t> waiting_prompts;  // their prompt lengths
    bool full = false;
  };
  // Where the prompt's best prefix in the prompt cache is, and what a token
  // of it costs to restore (the scheduler asks the cache, outside this lock).
  struct Cached {
    CacheMatch match;
    double restore_s_per_token = 0;
    const SharedPrefixes* shared = nullptr;  // what other scopes' slots may give
  };

  // Fed by the scheduler thread.
  void RecordStep(double seconds, int prefill_tokens, int generating);
  void RecordAnswer(int completion_tokens);
  void PublishSlots(std::vector<SlotView> slots);

  // Read by any thread.
  LoadForecast Predict(const Queue& q, const std::vector<engine::Token>& prompt, int max_tokens,
                       const std::string& scope, const Cached& cached) const;
  double prefill_s_per_token() const;

 private:
  double StepSecondsLocked(int n) const;  // needs mu_
  // Seconds until the request's turn for a slot, given when each busy slot frees.
  double WaitLocked(const Queue& q, const std::vector<double>& frees, size_t prompt_tokens,
                    double step_s) const;

  mutable std::mutex mu_;  // guards everything below
  std::vector<SlotView> view_;
  double prefill_s_per_token_ = 0.005;  // the two below divided; a guess until measured
  // Prompt seconds and prompt tokens of recent steps, each decayed by the
  // tokens that came after (kPrefillWindowTokens).
  double prefill_s_sum_ = 0, prefill_tokens_sum_ = 0;
  double step_s_ = 0.05;  // EWMA of a decode-only step
  // EWMA of a decode-only step by how many sequences it carried (index n;
  // 0 = not measured yet): a step with 8 streams costs more.
  std::vector<double> step_s_by_n_;
  double avg_completion_ = 64;  // EWMA of finished answers' tokens
};

}  // namespace hone::serve
