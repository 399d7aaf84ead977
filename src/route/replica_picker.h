// The affinity policy's decision: which of a route's targets should serve a
// request, by the time to first token each would likely give it. For another
// hone replica that is its wait for a slot (its own forecast, published on
// its /metrics, or the queue this router sees it holding, whichever is
// longer) plus the prefill of the part of the prompt it has not seen
// (PrefixIndex) at its measured prefill rate, after the unseen prefill of
// the requests this router sent there that have no first token yet: with
// few threads, slots that prefill share them, so those tokens go first. For the local engine it is the
// scheduler's own forecast. The router keeps the fallback order: the rest
// of the targets by the same estimate.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "route/prefix_affinity.h"
#include "route/replica_load.h"

namespace hone::route {

class ReplicaPicker {
 public:
  // A scrape of replica `upstream`'s /metrics: its text, or why it failed.
  // Unreachable, or draining (hone_server_draining 1): the replica goes to
  // the back of every order until a scrape says otherwise.
  // Returns true when the replica's reachability changed (the router logs it).
  bool Update(const std::string& upstream, bool ok, const std::string& text_or_error);

  struct Candidate {
    std::string label;     // the target ("upstream:model"), the prefix index's key
    std::string upstream;  // empty: the local engine
    std::string model;     // the model's name at that replica
    int in_flight = 0;     // this router's requests there now
    double local_ttft_s = 0;  // the local engine's forecast (local candidates)
    bool excluded = false;    // breaker open: last, whatever the estimate
  };
  struct Estimate {
    double ttft_s = 0;
    size_t matched_blocks = 0;
  };
  Estimate Predict(const Candidate& c, const PromptBlocks& p) const;
  // Indices of `cs`, best first. Estimates within a quarter of the best are
  // ties, taken in turn from `rotation`, so an idle cluster spreads new
  // prefixes over its replicas; the rest follow by estimate.
  std::vector<size_t> Order(const std::vector<Candidate>& cs, const PromptBlocks& p, uint64_t rotation) const;
  // The request went to `label`: its prefix is now likely cached there.
  void Record(const std::string& label, const PromptBlocks& p) { index_.Record(label, p); }

  // Prompt tokens sent to a target and not yet prefilled there, held until
  // the request's first token (or its end): Release, or drop the handle.
  class Pending {
   public:
    Pending(ReplicaPicker* picker, std::string label, double tokens);
    ~Pending() { Release(); }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    void Release();

   private:
    ReplicaPicker* picker_;
    const std::string label_;
    double tokens_;  // 0 once released
  };
  // The tokens of `p` that `label` has not seen, now pending there.
  std::unique_ptr<Pending> AddPending(const std::string& label, const PromptBlocks& p);
  double PendingTokens(const std::string& label) const;

  nlohmann::json Json() const;  // each replica's last scrape, for /hone/routes
  bool Reachable(const std::string& upstream) const;

 private:
  struct Replica {
    bool reachable = false;
    std::string error;
    std::map<std::string, ReplicaModelLoad> models;
    std::map<std::string, double> service_s;  // mean time in a slot, between the last two scrapes
  };
  PrefixIndex index_;
  mutable std::mutex mu_;
  std::map<std::string, Replica> replicas_;  // GUARDED_BY(mu_)
  std::map<std::string, double> pending_;    // GUARDED_BY(mu_): prompt tokens per label
};

}  // namespace hone::route
