#include "route/target_starter.h"

namespace hone::route {
namespace {

// An upper bound on the prompt's tokens for any byte-level tokenizer: one
// token per byte, plus a few per message for the template's role markers.
int64_t PromptTokenBound(const backend::GenerationRequest& r) {
  int64_t n = 0;
  for (const backend::Message& m : r.messages) {
    n += static_cast<int64_t>(m.content.size()) + 8;
    for (const backend::ToolCall& c : m.tool_calls)
      n += static_cast<int64_t>(c.name.size() + c.arguments.size()) + 8;
  }
  for (const std::string& p : r.prompts) n += static_cast<int64_t>(p.size()) + 2;
  for (const backend::Tool& t : r.tools)
    n += static_cast<int64_t>(t.name.size() + t.description.size() + t.parameters.size()) + 16;
  return n + 16;
}

std::string PromptText(const backend::GenerationRequest& r) {
  std::string text;
  for (const backend::Message& m : r.messages) text += m.content + "\n";
  for (const std::string& p : r.prompts) text += p;
  return text;
}

}  // namespace

TargetStarter::TargetStarter(serve::LocalBackend& local,
                             const std::map<std::string, std::unique_ptr<RemoteBackend>>& upstreams,
                             Spend* spend, RouteMetrics& metrics)
    : local_(local), upstreams_(upstreams), spend_(spend), metrics_(metrics) {}

RemoteBackend* TargetStarter::Upstream(const std::string& name) const {
  auto it = upstreams_.find(name);
  return it == upstreams_.end() ? nullptr : it->second.get();
}

bool TargetStarter::CanContinue(const Target& t) const {
  if (t.local()) return true;
  RemoteBackend* up = Upstream(t.upstream);
  return up && up->config().continuation;
}

backend::GenerationRequest TargetStarter::ForTarget(const backend::GenerationRequest& r, const Target& t) {
  backend::GenerationRequest out = r;
  out.model = t.model;
  return out;
}

Status TargetStarter::Reserve(const RouteConfig& route, const Target& t, backend::GenerationRequest* r,
                              Started* out, bool* budget_refused) {
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
    prompt_bound = PromptTokenBound(*r);
    max_tokens = r->max_tokens >= 0 ? r->max_tokens : spend_->reserve_max_tokens();
    // The reservation holds for max_tokens: the upstream is held to it too.
    if (r->max_tokens < 0 && !price.free()) r->max_tokens = max_tokens;
  }
  auto hold = spend_->Reserve(route.name, t.upstream, t.model, r->tenant, price, prompt_bound, max_tokens);
  if (!hold) {
    if (budget_refused && hold.error().code == ErrorCode::kRateLimited) *budget_refused = true;
    metrics_.Add(series::kAttempts,
                 Labels({{"route", route.name}, {"target", t.Label()}, {"outcome", "budget"}}));
    return hold.error();
  }
  out->hold = std::move(*hold);
  r->routing.ledger_id = out->hold->id;
  return {};
}

Result<TargetStarter::Started> TargetStarter::StartLocal(const RouteConfig& route, const Target& t,
                                                         const backend::GenerationRequest& r,
                                                         const serve::LocalBackend::Forecast* forecast,
                                                         Started out) {
  out.attempts = 1;
  if (forecast && forecast->loaded) out.predicted_ttft_s = forecast->load.ttft_s;
  auto c = local_.Start(r, forecast ? forecast->prepared : nullptr);
  if (!c) {
    if (out.hold) spend_->Release(*out.hold);
    metrics_.Add(
        series::kAttempts,
        Labels({{"route", route.name}, {"target", t.Label()}, {"outcome", CodeLabel(c.error().code)}}));
    return c.error();
  }
  out.completion = std::move(*c);
  return out;
}

Result<TargetStarter::Started> TargetStarter::Start(const RouteConfig& route, const Target& t,
                                                    const backend::GenerationRequest& in,
                                                    backend::Clock::time_point deadline,
                                                    const serve::LocalBackend::Forecast* forecast,
                                                    bool* budget_refused) {
  backend::GenerationRequest r = ForTarget(in, t);
  Started out;
  if (spend_) {
    if (Status s = Reserve(route, t, &r, &out, budget_refused); !s) return s.error();
  }
  if (t.local()) return StartLocal(route, t, r, forecast, std::move(out));
  // Whatever fails below cost nothing: the hold goes back.
  RemoteBackend* up = Upstream(t.upstream);
  AttemptsResult tried = up ? RunAttempts(*up, route, t, r, deadline, metrics_, jitter_) : AttemptsResult{};
  if (!up) tried.completion = MakeError(ErrorCode::kInternal, "no upstream '" + t.upstream + "'");
  out.attempts = tried.attempts;
  if (!tried.completion) {
    if (out.hold) spend_->Release(*out.hold);
    return tried.completion.error();
  }
  out.completion = std::move(*tried.completion);
  return out;
}

void TargetStarter::Settle(const RouteConfig& route, SpendHold& hold, const backend::GenerationRequest& r,
                           backend::Usage usage, const std::string& outcome) {
  if (!spend_ || hold.done) return;
  if (usage.prompt_tokens == 0 && (!r.messages.empty() || !r.prompts.empty())) {
    // The target reported no usage (a stream cut short): count the prompt here.
    usage.estimated = true;
    const std::string text = PromptText(r);
    std::optional<int> n;
    for (const Target& t : route.targets)
      if (t.local() && !n) n = local_.CountTokens(t.model, text);
    usage.prompt_tokens = n ? *n : static_cast<int>(text.size() / 4 + 1);
  }
  spend_->Settle(hold, usage, usage.estimated, outcome);
}

}  // namespace hone::route
