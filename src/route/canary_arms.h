// A route's canary as the router uses it: which arm a request takes (the
// route's own targets, the candidate first, or the baseline with a copy sent
// to the candidate alone as a shadow), and what each answer tells the canary.
// The shadow copies run on their own threads, at most 8 at once; the client
// never sees them and they spend no tenant's budget.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "route/canary.h"
#include "route/config.h"

namespace hone::route {

// Called once when a routed answer ends: its TTFT (none when it failed before
// text), total seconds, whether it failed, and the index of the target that
// served it.
using AnswerEnd =
    std::function<void(std::optional<double> ttft_s, double total_s, bool error, size_t target)>;

class CanaryArms {
 public:
  // `route` has a [route.canary]; `ledger` may be null (nothing saved).
  CanaryArms(const RouteConfig& route, Ledger* ledger, double now);
  ~CanaryArms();  // StopShadows

  // Starts `route`'s targets in policy order (the router's StartRoute).
  using StartFn = std::function<Result<std::unique_ptr<backend::Completion>>(
      const RouteConfig& route, const backend::GenerationRequest& r, AnswerEnd on_end)>;
  struct Choice {
    const RouteConfig* route = nullptr;  // the arm's targets; null: the route's own
    AnswerEnd on_end;                    // records the answer on its arm
    std::string cache_suffix;            // the response cache is kept per arm
  };
  // Picks the request's arm (sticky per conversation). For a shadow pick a
  // copy starts at once on its own thread through `shadow_start`, which must
  // stay callable until StopShadows returns.
  Choice Choose(const backend::GenerationRequest& r, const StartFn& shadow_start);
  // Cancels the shadow copies in flight and waits for their threads.
  void StopShadows();
  Canary& canary() { return *canary_; }
  const Canary& canary() const { return *canary_; }

 private:
  void StartShadow(const backend::GenerationRequest& r, const StartFn& start);

  std::unique_ptr<Canary> canary_;
  RouteConfig candidate_route_;  // the candidate target, then the route's own as its fallback
  RouteConfig shadow_route_;     // the candidate alone
  std::atomic<int> shadows_in_flight_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace hone::route
