// Starting one of a route's targets, and settling what it cost: the budget
// reservation before a priced upstream is asked (a 429 naming the budget when
// it cannot take the worst case), the local backend's Start, or an upstream's
// attempt loop (attempt_loop.h). The router orders the targets; this starts
// whichever it picks, and a RoutedCompletion calls it again to carry a broken
// answer on to another target. It knows nothing of policies or canaries.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "route/attempt_loop.h"
#include "route/config.h"
#include "route/remote_backend.h"
#include "route/route_metrics.h"
#include "route/spend.h"
#include "serve/local_backend.h"

namespace hone::route {

class TargetStarter {
 public:
  // All referenced objects outlive the starter; `spend` null: no ledger.
  TargetStarter(serve::LocalBackend& local,
                const std::map<std::string, std::unique_ptr<RemoteBackend>>& upstreams, Spend* spend,
                RouteMetrics& metrics);

  struct Started {
    std::unique_ptr<backend::Completion> completion;
    int attempts = 0;
    std::optional<double> predicted_ttft_s;  // local targets: the scheduler's forecast
    std::shared_ptr<SpendHold> hold;         // its spend: settled when the answer ends
  };
  // `forecast`: the local forecast the router already made (local targets):
  // its TTFT is kept for the prediction-error histogram, and the prompt it
  // rendered is started, so neither is made twice. When a budget refuses,
  // `*budget_refused` is set and the error (429) names the budget.
  Result<Started> Start(const RouteConfig& route, const Target& t, const backend::GenerationRequest& r,
                        backend::Clock::time_point deadline,
                        const serve::LocalBackend::Forecast* forecast = nullptr,
                        bool* budget_refused = nullptr);
  // Settles a target's part of an answer (at its end or when that target
  // broke). Prompt tokens the target did not report are counted with the
  // route's local tokenizer where one is loaded.
  void Settle(const RouteConfig& route, SpendHold& hold, const backend::GenerationRequest& r,
              backend::Usage usage, const std::string& outcome);
  // Whether a target can continue a partial answer (local always can).
  bool CanContinue(const Target& t) const;
  RouteMetrics& metrics() { return metrics_; }
  RemoteBackend* Upstream(const std::string& name) const;
  // `r` for target `t`: the target's model name in place of the route's.
  static backend::GenerationRequest ForTarget(const backend::GenerationRequest& r, const Target& t);

 private:
  // Reserves the worst case for a priced target; may lower r->max_tokens' "unbounded" to the reserved count.
  Status Reserve(const RouteConfig& route, const Target& t, backend::GenerationRequest* r, Started* out,
                 bool* budget_refused);
  Result<Started> StartLocal(const RouteConfig& route, const Target& t, const backend::GenerationRequest& r,
                             const serve::LocalBackend::Forecast* forecast, Started out);

  serve::LocalBackend& local_;
  const std::map<std::string, std::unique_ptr<RemoteBackend>>& upstreams_;  // fixed after construction
  Spend* const spend_;
  RouteMetrics& metrics_;
  Jitter jitter_;  // backoff draws
};

}  // namespace hone::route
