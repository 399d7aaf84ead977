// The scheduler's side of forecasting (serve/forecaster.h): what it
// publishes after each step, and a forecast for a new request from the queue
// and the prompt cache as they are now.
#include "serve/scheduler.h"
#include "serve/scheduler_slot.h"

namespace hone::serve {

void Scheduler::Publish() {
  std::vector<Forecaster::SlotView> v;
  v.reserve(slots_.size());
  for (auto& s : slots_) v.push_back({s->job, s->last_job, s->prefilled, s->result.completion_tokens});
  forecaster_.PublishSlots(std::move(v));
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
  // The prompt cache first: it has its own lock, never taken inside another.
  Forecaster::Cached cached;
  if (cache_ && !prompt.empty()) cached.match = FindCached(scope, prompt);
  cached.shared = &shared_;
  if (cache_) cached.restore_s_per_token = cache_->RestoreSecondsPerToken(cached.match.tier);
  Forecaster::Queue q;
  q.slots = opt_.slots;
  q.prefill_chunk = opt_.prefill_chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Under mu_, with the queue: a job is always counted in one of the two.
    q.active = active_.load();
    q.waiting = static_cast<int>(queue_.size());
    for (const Pending& p : queue_) q.waiting_prompts.push_back(p.job->prompt.size());
    q.full = stopping_ || RoomLocked() <= 0;
  }
  return forecaster_.Predict(q, prompt, max_tokens, scope, cached);
}

}  // namespace hone::serve
