#include "route/routed_completion.h"

#include <cstdio>

namespace hone::route {

using backend::Clock;
using Kind = backend::CompletionEvent::Kind;

RoutedCompletion::RoutedCompletion(TargetStarter* starter, const RouteConfig* route, backend::GenerationRequest request,
                                   size_t target, std::vector<size_t> rest, TargetStarter::Started first,
                                   Clock::time_point start, std::string note)
    : starter_(starter),
      route_(route),
      request_(std::move(request)),
      target_(target),
      rest_(std::move(rest)),
      inner_(std::move(first.completion)),
      hold_(std::move(first.hold)),
      predicted_ttft_s_(first.predicted_ttft_s),
      start_(start),
      note_(std::move(note)) {}

void RoutedCompletion::ReportEnd(bool error) {
  if (end_reported_ || !on_end_) return;
  end_reported_ = true;
  if (cancelled_) return;  // the client left: says nothing about the target
  on_end_(ttft_s_, std::chrono::duration<double>(Clock::now() - start_).count(), error, target_);
}

RoutedCompletion::~RoutedCompletion() {
  ReportEnd(true);
  if (hold_ && !hold_->done) {
    usage_.estimated = true;  // the rest of the answer was never read
    starter_->Settle(*route_, *hold_, request_, usage_, outcome_.empty() ? "dropped" : outcome_);
  }
}

void RoutedCompletion::Cancel() {
  cancelled_ = true;
  inner_->Cancel();
}

backend::CompletionEvent RoutedCompletion::Next(Clock::time_point deadline) {
  for (;;) {
    backend::CompletionEvent e = inner_->Next(deadline);
    // Built only where a series is written, not for every token.
    auto labels = [&] { return Labels({{"route", route_->name}, {"target", TargetLabel()}}); };
    if (e.kind == Kind::kText) {
      if (!first_text_seen_) {
        first_text_seen_ = true;
        if (pending_) pending_->Release();
        const double ttft = std::chrono::duration<double>(Clock::now() - start_).count();
        ttft_s_ = ttft;
        starter_->metrics().Observe(series::kTtft, labels(), ttft);
        if (predicted_ttft_s_)
          starter_->metrics().Observe(series::kTtftError, Labels({{"route", route_->name}}),
                                     *predicted_ttft_s_ - ttft);
      }
      if (e.choice == 0) emitted_ += e.text;
      return e;
    }
    if (e.kind == Kind::kToolCall) tool_call_seen_ = true;
    if (e.kind == Kind::kDone && hold_) {
      starter_->Settle(*route_, *hold_, request_, usage_, outcome_.empty() ? "ok" : outcome_);
    }
    if (e.kind == Kind::kDone) ReportEnd(any_error_);
    if (e.kind != Kind::kChoiceEnd) return e;
    backend::ChoiceResult& r = e.result;
    const bool broke =
        r.error && (r.error->code == ErrorCode::kUpstream || r.error->code == ErrorCode::kTimeout);
    if (broke && !cancelled_ && inner_->choices() == 1) {
      starter_->metrics().Add(series::kStreamFailures, labels());
      earlier_completion_tokens_ += r.usage.completion_tokens;
      const std::string from = TargetLabel();
      const Error why = *r.error;
      if (hold_) {  // the broken part is paid for as far as it went
        backend::Usage part = usage_;
        part += r.usage;
        starter_->Settle(*route_, *hold_, request_, part, "broken: " + why.message);
        hold_.reset();
        usage_ = {};
      }
      if (Recover(why, deadline)) {
        std::fprintf(stderr, "[hone] route %s: %s broke after %zu bytes (%s); continued on %s\n",
                     route_->name.c_str(), from.c_str(), emitted_.size(), why.message.c_str(),
                     TargetLabel().c_str());
        starter_->metrics().Add(series::kRecoveries,
                               Labels({{"route", route_->name}, {"from", from}, {"to", TargetLabel()}}));
        note_ += " continued_on=" + TargetLabel() + " after=" + from;
        continue;  // read on from the new target
      }
      std::fprintf(stderr, "[hone] route %s: %s broke after %zu bytes and no target could continue: %s\n",
                   route_->name.c_str(), from.c_str(), emitted_.size(), why.message.c_str());
      note_ += " stream_failed";
    }
    usage_ += r.usage;
    if (r.error && r.finish != backend::FinishReason::kCancelled) any_error_ = true;
    if (outcome_.empty() && (r.error || r.finish == backend::FinishReason::kCancelled))
      outcome_ = r.error ? std::string(backend::FinishReasonName(r.finish)) + ": " + r.error->message
                         : std::string(backend::FinishReasonName(r.finish));
    r.usage.completion_tokens += earlier_completion_tokens_;
    r.route = note_;
    const double total = std::chrono::duration<double>(Clock::now() - start_).count();
    starter_->metrics().Observe(series::kLatency, labels(), total);
    starter_->metrics().Add(series::kRequests,
                           Labels({{"route", route_->name},
                                   {"target", TargetLabel()},
                                   {"outcome", r.error ? CodeLabel(r.error->code) : std::string("ok")}}));
    return e;
  }
}

bool RoutedCompletion::Recover(const Error& why, Clock::time_point) {
  if (request_.format.type != backend::ResponseFormat::Type::kNone && !emitted_.empty()) return false;
  // Half a tool call cannot be handed to another model to finish.
  if (tool_call_seen_) return false;
  backend::GenerationRequest next = request_;
  const bool resume = !emitted_.empty();
  if (resume) {
    if (request_.chat) {
      if (request_.continue_final && !next.messages.empty() && next.messages.back().role == "assistant")
        next.messages.back().content += emitted_;  // the client's own prefix, continued further
      else
        next.messages.push_back({"assistant", emitted_});
      next.continue_final = true;
    } else if (request_.prompts.size() == 1) {
      next.prompts[0] += emitted_;
    } else {
      return false;
    }
    if (request_.max_tokens >= 0)
      next.max_tokens = std::max(1, request_.max_tokens - earlier_completion_tokens_);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(route_->retry.deadline_s));
  while (!rest_.empty()) {
    const size_t i = rest_.front();
    rest_.erase(rest_.begin());
    const Target& t = route_->targets[i];
    if (resume && !starter_->CanContinue(t)) continue;
    auto tt = starter_->Start(*route_, t, next, deadline);
    if (!tt) continue;
    inner_ = std::move(tt->completion);
    hold_ = std::move(tt->hold);
    predicted_ttft_s_.reset();
    target_ = i;
    return true;
  }
  (void)why;
  return false;
}

}  // namespace hone::route
