// The Completion a routed request returns: it reads the target's completion
// and, where that one breaks, carries on elsewhere so the client sees one
// answer.
//  - Broken before any text reached the client: the same request starts on
//    the route's next target.
//  - Broken after text went out: the next target that can continue a partial
//    answer (the local engine always can; an upstream with continuation =
//    true) gets the conversation plus the text so far as an assistant prefix,
//    and only the rest of the answer is streamed. Never for a structured
//    output (a JSON schema must not be spliced), and never for several choices.
//  - No target can: the choice ends with its error, which the codec sends as
//    an explicit error event, never a clean end.
// Every recovery and every failure is counted and logged.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "route/canary_arms.h"
#include "route/replica_picker.h"
#include "route/target_starter.h"

namespace hone::route {

class RoutedCompletion final : public backend::Completion {
 public:
  RoutedCompletion(TargetStarter* starter, const RouteConfig* route, backend::GenerationRequest request, size_t target,
                   std::vector<size_t> rest, TargetStarter::Started first, backend::Clock::time_point start,
                   std::string note);
  // Settles whatever the answer cost if it was dropped before its end.
  ~RoutedCompletion() override;
  // Called once when the answer ends (or is dropped unfinished, as an error;
  // not when the client cancelled): its TTFT, total seconds, whether it
  // failed, and the index of the target that served it. The canary's numbers.
  using OnEnd = AnswerEnd;
  void SetOnEnd(OnEnd f) { on_end_ = std::move(f); }
  // The affinity policy's count of this prompt's tokens not yet prefilled at
  // its target: given back at the first token or when the answer ends.
  void SetPending(std::unique_ptr<ReplicaPicker::Pending> p) { pending_ = std::move(p); }
  backend::CompletionEvent Next(backend::Clock::time_point deadline) override;
  void Cancel() override;
  size_t choices() const override { return inner_->choices(); }
  const std::string& model() const override { return request_.model; }
  double load_seconds() const override { return inner_->load_seconds(); }

 private:
  bool Recover(const Error& why, backend::Clock::time_point deadline);
  std::string TargetLabel() const { return route_->targets[target_].Label(); }

  TargetStarter* starter_;
  const RouteConfig* route_;
  const backend::GenerationRequest request_;
  size_t target_;
  std::vector<size_t> rest_;  // targets not yet used, in the route's order
  std::unique_ptr<backend::Completion> inner_;
  std::shared_ptr<SpendHold> hold_;  // the current target's spend (null without a ledger)
  backend::Usage usage_;               // of the current target, over the choices ended so far
  std::string outcome_;              // the first choice's end that was not ok
  std::optional<double> predicted_ttft_s_;
  const backend::Clock::time_point start_;
  std::string note_;
  std::string emitted_;                // text of choice 0 that reached the client
  bool tool_call_seen_ = false;        // a tool call went out: the stream cannot be resumed elsewhere
  int earlier_completion_tokens_ = 0;  // from targets that broke
  bool first_text_seen_ = false;
  std::atomic<bool> cancelled_{false};
  OnEnd on_end_;
  std::unique_ptr<ReplicaPicker::Pending> pending_;
  bool end_reported_ = false;
  bool any_error_ = false;
  std::optional<double> ttft_s_;
  void ReportEnd(bool error);
};

}  // namespace hone::route
