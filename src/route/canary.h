// A gray release that ramps itself: a route's candidate target (a new model,
// quantization or upstream) gets a growing share of conversations, and each
// step is judged on the candidate's own numbers against the baseline's over
// the same window.
//
//            shadow (optional: a copy of steps[0]% goes to the candidate,
//              |     its answers discarded, for one hold)
//              v
//   ramping at steps[i]% --hold passed, >= min_requests, healthy--> steps[i+1]%
//        |    ^                                                        |
//        |    +------ hold passed, too few requests: hold ------------+
//        |                                                  last step (100%)
//        v                                                         v
//   rolled_back  <--- error rate or P99 ratio over its limit    promoted
//   (any time, once the step has min_requests)
//
// Sticky: a conversation (the request's `user`, else its first system and
// user messages) keeps the arm it was first given, for as long as it stays
// active (30 min idle); only a rollback moves candidate conversations back.
// The state is saved in the ledger database and survives a restart.
// Thread-safe.
#pragma once

#include <chrono>

#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "route/config.h"
#include "route/ledger.h"
#include "backend/backend.h"

namespace hone::route {

// The conversation a request belongs to, for stickiness.
std::string ConversationKey(const backend::GenerationRequest& r);

// Seconds since the Unix epoch: the clock a canary's steps are kept in (it
// survives restarts in the ledger, so not the steady clock).
inline double CanaryNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class Canary {
 public:
  enum class State { kShadow, kRamping, kPromoted, kRolledBack };
  enum class Arm { kBaseline, kCandidate, kShadow };  // kShadow: baseline answers, a copy to the candidate

  // `ledger` may be null (nothing saved). Restores a saved state for the
  // same candidate; a changed candidate starts over.
  Canary(std::string route, CanaryConfig config, Ledger* ledger, double now);

  Arm Pick(const std::string& conversation, double now);
  // One answer of an arm: its TTFT (none when it failed before text), its
  // total time, and whether it failed.
  void Record(bool candidate, std::optional<double> ttft_s, double total_s, bool error);
  // Judges the current step (called about once a second).
  void Tick(double now);
  Status Promote(double now);
  Status Rollback(const std::string& why, double now);

  const CanaryConfig& config() const { return config_; }
  State state() const;
  double percent() const;  // of new conversations the candidate takes now
  nlohmann::json Json(double now) const;
  // Sample lines by family name; the router gathers every route's lines per
  // family and writes each family once, after FamilyHeaderOf(name).
  using Families = std::map<std::string, std::string>;
  void RenderMetrics(Families* out) const;
  static std::string FamilyHeaderOf(const std::string& family);

 private:
  struct Window {
    long requests = 0, errors = 0;
    std::vector<double> ttft, total;  // at most kMaxSamples each, then every other one is dropped
  };
  struct Seen {
    std::string key;
    bool candidate;
    double last;
  };
  double PercentLocked() const;
  void MoveLocked(State s, size_t step, const std::string& why, const char* decision, double now);
  void SaveLocked(double now);

  const std::string route_;
  const CanaryConfig config_;
  Ledger* const ledger_;
  mutable std::mutex mu_;
  State state_ = State::kRamping;  // GUARDED_BY(mu_)
  size_t step_ = 0;                // GUARDED_BY(mu_): index into config_.steps
  double step_started_ = 0;        // GUARDED_BY(mu_)
  double last_hold_log_ = 0;       // GUARDED_BY(mu_)
  std::string reason_;             // GUARDED_BY(mu_): why the last move
  Window candidate_, baseline_;    // GUARDED_BY(mu_): this step's numbers
  std::list<Seen> seen_;           // GUARDED_BY(mu_): conversations, most recent first
  std::unordered_map<std::string, std::list<Seen>::iterator> seen_index_;  // GUARDED_BY(mu_)
  std::map<std::string, long> decisions_;                                  // GUARDED_BY(mu_)
  long answers_[2][2] = {{0, 0}, {0, 0}};  // GUARDED_BY(mu_): [candidate][error]
};

const char* CanaryStateName(Canary::State s);

}  // namespace hone::route
