#include "route/canary_arms.h"

#include <thread>

#include "route/refusals.h"

namespace hone::route {

CanaryArms::CanaryArms(const RouteConfig& route, Ledger* ledger, double now)
    : canary_(std::make_unique<Canary>(route.name, *route.canary, ledger, now)),
      candidate_route_(route),
      shadow_route_(route) {
  candidate_route_.targets.insert(candidate_route_.targets.begin(), route.canary->target);
  candidate_route_.policy = Policy::kFailover;
  shadow_route_.targets = {route.canary->target};
  shadow_route_.policy = Policy::kFailover;
}

CanaryArms::~CanaryArms() { StopShadows(); }

void CanaryArms::StopShadows() {
  stopping_ = true;
  while (shadows_in_flight_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

CanaryArms::Choice CanaryArms::Choose(const backend::GenerationRequest& r, const StartFn& shadow_start) {
  Choice out;
  const Canary::Arm arm = canary_->Pick(ConversationKey(r), CanaryNow());
  Canary* canary = canary_.get();
  const bool candidate = arm == Canary::Arm::kCandidate;
  if (candidate) out.route = &candidate_route_;
  out.cache_suffix = candidate ? "|candidate" : "|baseline";
  // A candidate answer served by any other target is the candidate's failure.
  out.on_end = [canary, candidate](std::optional<double> ttft, double total, bool error, size_t target) {
    canary->Record(candidate, ttft, total, error || (candidate && target != 0));
  };
  if (arm == Canary::Arm::kShadow) {
    StartShadow(r, shadow_start);
    out.on_end = [canary](std::optional<double> ttft, double total, bool error, size_t) {
      canary->Record(false, ttft, total, error);
    };
  }
  return out;
}

void CanaryArms::StartShadow(const backend::GenerationRequest& r, const StartFn& start) {
  // At most a few copies at once: a slow candidate must not pile up threads.
  if (shadows_in_flight_.fetch_add(1) >= 8) {
    --shadows_in_flight_;
    return;
  }
  backend::GenerationRequest copy = r;
  copy.cancelled = [this] { return stopping_.load(); };
  copy.routing.no_cache = true;
  copy.tenant.clear();  // a copy the client never sees must not use up the client's own budget
  std::thread([this, start, copy = std::move(copy)] {
    Canary* canary = canary_.get();
    AnswerEnd on_end = [canary](std::optional<double> ttft, double total, bool error, size_t) {
      canary->Record(true, ttft, total, error);
    };
    auto c = start(shadow_route_, copy, on_end);
    if (!c) {
      if (!RequestsOwnRefusal(c.error())) on_end(std::nullopt, 0, true, 0);
    } else {
      // Read to the end and discard: only the numbers count.
      for (;;) {
        if (stopping_) (*c)->Cancel();
        const auto deadline = backend::Clock::now() + std::chrono::milliseconds(100);
        if ((*c)->Next(deadline).kind == backend::CompletionEvent::Kind::kDone) break;
      }
    }
    c = MakeError(ErrorCode::kAborted, "done");  // ends the completion before the count drops
    --shadows_in_flight_;
  }).detach();
}

}  // namespace hone::route
