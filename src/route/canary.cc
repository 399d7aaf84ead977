#include "route/canary.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "route/route_metrics.h"

namespace hone::route {
namespace {

constexpr size_t kMaxSamples = 20000;
constexpr size_t kMaxConversations = 100000;
constexpr double kConversationIdleS = 1800;
constexpr size_t kMinBaselineSamples = 20;  // fewer: the P99 ratio is not judged

double P99(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t at = std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(at), v.end());
  return v[at];
}

void Add(std::vector<double>* v, double x) {
  if (v->size() >= kMaxSamples) {  // keep a spread over the whole window
    size_t j = 0;
    for (size_t i = 0; i < v->size(); i += 2) (*v)[j++] = (*v)[i];
    v->resize(j);
  }
  v->push_back(x);
}

// 0..9999, the same for the same conversation on every replica.
unsigned Bucket(const std::string& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across processes and builds
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return static_cast<unsigned>(h % 10000);
}

std::optional<Canary::State> StateFromName(const std::string& s) {
  for (auto st : {Canary::State::kShadow, Canary::State::kRamping, Canary::State::kPromoted,
                  Canary::State::kRolledBack})
    if (s == CanaryStateName(st)) return st;
  return std::nullopt;
}

}  // namespace

const char* CanaryStateName(Canary::State s) {
  switch (s) {
    case Canary::State::kShadow:
      return "shadow";
    case Canary::State::kRamping:
      return "ramping";
    case Canary::State::kPromoted:
      return "promoted";
    case Canary::State::kRolledBack:
      return "rolled_back";
  }
  return "?";
}

std::string ConversationKey(const backend::GenerationRequest& r) {
  if (!r.routing.user.empty()) return "u:" + r.routing.user;
  std::string key = "m:";
  bool user_seen = false;
  for (const backend::Message& m : r.messages) {
    if (m.role == "system" || m.role == "developer") {
      key += m.content.substr(0, 512) + "\x1f";
    } else if (m.role == "user") {
      key += m.content.substr(0, 512);
      user_seen = true;
      break;
    }
  }
  if (!user_seen && !r.prompts.empty()) key += r.prompts[0].substr(0, 512);
  return key;
}

Canary::Canary(std::string route, CanaryConfig config, Ledger* ledger, double now)
    : route_(std::move(route)), config_(std::move(config)), ledger_(ledger) {
  state_ = config_.shadow ? State::kShadow : State::kRamping;
  step_started_ = now;
  reason_ = "started";
  if (!ledger_) return;
  auto saved = ledger_->LoadCanary(route_);
  if (!saved) {
    // Unknown, not absent: start afresh in memory but leave the saved state
    // alone (it may say rolled_back).
    std::fprintf(stderr, "[hone] canary %s: cannot read its saved state (%s); starting afresh\n", route_.c_str(),
                 saved.error().message.c_str());
    return;
  }
  if (*saved && (*saved)->target == config_.target.Label()) {
    const auto st = StateFromName((*saved)->state);
    if (st && (*saved)->step >= 0 && static_cast<size_t>((*saved)->step) < config_.steps.size()) {
      state_ = *st;
      step_ = static_cast<size_t>((*saved)->step);
      // The hold restarts: numbers from before the restart are gone.
      step_started_ = now;
      reason_ = (*saved)->reason + " (restored after a restart)";
      std::fprintf(stderr, "[hone] canary %s: restored %s at %g%% for %s\n", route_.c_str(), CanaryStateName(state_),
                   PercentLocked(), config_.target.Label().c_str());
      return;
    }
  }
  SaveLocked(now);
}

double Canary::PercentLocked() const {
  switch (state_) {
    case State::kShadow:
      return config_.steps[0];  // mirrored, not served
    case State::kRamping:
      return config_.steps[step_];
    case State::kPromoted:
      return 100;
    case State::kRolledBack:
      return 0;
  }
  return 0;
}

Canary::State Canary::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

double Canary::percent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kShadow ? 0 : PercentLocked();
}

Canary::Arm Canary::Pick(const std::string& conversation, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kRolledBack) return Arm::kBaseline;
  if (state_ == State::kShadow)
    return Bucket(conversation) < config_.steps[0] * 100 ? Arm::kShadow : Arm::kBaseline;
  if (auto it = seen_index_.find(conversation); it != seen_index_.end()) {
    if (now - it->second->last < kConversationIdleS) {
      it->second->last = now;
      seen_.splice(seen_.begin(), seen_, it->second);
      return it->second->candidate ? Arm::kCandidate : Arm::kBaseline;
    }
    seen_.erase(it->second);
    seen_index_.erase(it);
  }
  const bool candidate = Bucket(conversation) < PercentLocked() * 100;
  seen_.push_front({conversation, candidate, now});
  seen_index_[conversation] = seen_.begin();
  while (seen_.size() > kMaxConversations) {
    seen_index_.erase(seen_.back().key);
    seen_.pop_back();
  }
  return candidate ? Arm::kCandidate : Arm::kBaseline;
}

void Canary::Record(bool candidate, std::optional<double> ttft_s, double total_s, bool error) {
  std::lock_guard<std::mutex> lock(mu_);
  Window& w = candidate ? candidate_ : baseline_;
  ++w.requests;
  ++answers_[candidate][error];
  if (error) {
    ++w.errors;
    return;
  }
  if (ttft_s) Add(&w.ttft, *ttft_s);
  Add(&w.total, total_s);
}

void Canary::SaveLocked(double now) {
  if (!ledger_) return;
  Ledger::CanaryRow row{route_, config_.target.Label(), CanaryStateName(state_), reason_,
                        static_cast<int64_t>(step_), step_started_};
  if (Status s = ledger_->SaveCanary(row, now); !s)
    std::fprintf(stderr, "[hone] canary %s: cannot save its state: %s\n", route_.c_str(), s.error().message.c_str());
}

void Canary::MoveLocked(State s, size_t step, const std::string& why, const char* decision, double now) {
  state_ = s;
  step_ = step;
  step_started_ = now;
  reason_ = why;
  candidate_ = {};
  baseline_ = {};
  ++decisions_[decision];
  if (s == State::kRolledBack) {  // every conversation back to the baseline
    seen_.clear();
    seen_index_.clear();
  }
  std::fprintf(stderr, "[hone] canary %s: %s -> %s at %g%% for %s: %s\n", route_.c_str(), decision,
               CanaryStateName(state_), PercentLocked(), config_.target.Label().c_str(), why.c_str());
  SaveLocked(now);
}

void Canary::Tick(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kRamping && state_ != State::kShadow) return;
  const long n = candidate_.requests;
  char why[256];
  if (n >= config_.min_requests) {
    const double error_rate = static_cast<double>(candidate_.errors) / static_cast<double>(n);
    if (error_rate > config_.max_error_rate) {
      std::snprintf(why, sizeof why, "candidate error rate %.3f over %.3f (%ld of %ld)", error_rate,
                    config_.max_error_rate, candidate_.errors, n);
      return MoveLocked(State::kRolledBack, step_, why, "rollback", now);
    }
    if (baseline_.total.size() >= kMinBaselineSamples && !candidate_.total.empty()) {
      const double total_ratio = P99(candidate_.total) / std::max(1e-6, P99(baseline_.total));
      const double ttft_ratio = baseline_.ttft.size() >= kMinBaselineSamples && !candidate_.ttft.empty()
                                    ? P99(candidate_.ttft) / std::max(1e-6, P99(baseline_.ttft))
                                    : 0;
      if (std::max(total_ratio, ttft_ratio) > config_.max_p99_ratio) {
        std::snprintf(why, sizeof why, "candidate P99 %.2fx the baseline's (TTFT %.2fx, total %.2fx; limit %.2fx)",
                      std::max(total_ratio, ttft_ratio), ttft_ratio, total_ratio, config_.max_p99_ratio);
        return MoveLocked(State::kRolledBack, step_, why, "rollback", now);
      }
    }
  }
  if (now - step_started_ < config_.hold_s) return;
  if (n < config_.min_requests) {
    if (now - last_hold_log_ >= config_.hold_s) {
      last_hold_log_ = now;
      ++decisions_["hold"];
      std::fprintf(stderr, "[hone] canary %s: hold at %g%%: %ld of %d candidate requests so far\n", route_.c_str(),
                   PercentLocked(), n, config_.min_requests);
    }
    return;
  }
  std::snprintf(why, sizeof why, "healthy over %ld candidate requests", n);
  if (state_ == State::kShadow) return MoveLocked(State::kRamping, 0, why, "advance", now);
  if (step_ + 1 >= config_.steps.size() || config_.steps[step_ + 1] >= 100)
    return MoveLocked(State::kPromoted, config_.steps.size() - 1, why, "promote", now);
  MoveLocked(State::kRamping, step_ + 1, why, "advance", now);
}

Status Canary::Promote(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kPromoted) return MakeError(ErrorCode::kInvalidArgument, "the canary is already promoted");
  MoveLocked(State::kPromoted, config_.steps.size() - 1, "promoted by an operator", "promote", now);
  return Status::Ok();
}

Status Canary::Rollback(const std::string& why, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kRolledBack) return MakeError(ErrorCode::kInvalidArgument, "the canary is already rolled back");
  MoveLocked(State::kRolledBack, step_, why, "rollback", now);
  return Status::Ok();
}

nlohmann::json Canary::Json(double now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto window = [](const Window& w) {
    return nlohmann::json{{"requests", w.requests},
                          {"errors", w.errors},
                          {"error_rate", w.requests ? double(w.errors) / double(w.requests) : 0.0},
                          {"ttft_p99_s", P99(w.ttft)},
                          {"total_p99_s", P99(w.total)}};
  };
  return {{"target", config_.target.Label()},
          {"state", CanaryStateName(state_)},
          {"percent", state_ == State::kShadow ? 0 : PercentLocked()},
          {"shadow_percent", state_ == State::kShadow ? config_.steps[0] : 0},
          {"step", step_},
          {"steps", config_.steps},
          {"step_age_s", now - step_started_},
          {"hold_s", config_.hold_s},
          {"min_requests", config_.min_requests},
          {"max_p99_ratio", config_.max_p99_ratio},
          {"max_error_rate", config_.max_error_rate},
          {"reason", reason_},
          {"candidate", window(candidate_)},
          {"baseline", window(baseline_)}};
}

std::string Canary::FamilyHeaderOf(const std::string& family) {
  if (family == "hone_canary_percent")
    return serve::FamilyHeader(family, "gauge", "Share of new conversations the candidate takes, percent");
  if (family == "hone_canary_state")
    return serve::FamilyHeader(family, "gauge", "Canary state: 0 shadow, 1 ramping, 2 promoted, 3 rolled back");
  if (family == "hone_canary_answers_total")
    return serve::FamilyHeader(family, "counter", "Answers per canary arm and outcome");
  if (family == "hone_canary_decisions_total")
    return serve::FamilyHeader(family, "counter", "Canary decisions (step, hold, promote, rollback)");
  return serve::FamilyHeader(family, "gauge", "P99 latency of the canary's current window per arm, seconds");
}

void Canary::RenderMetrics(Families* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string r = Labels({{"route", route_}});
  (*out)["hone_canary_percent"] += "hone_canary_percent{" + r + "} " +
                                   std::to_string(state_ == State::kShadow ? 0 : PercentLocked()) + "\n";
  (*out)["hone_canary_state"] += "hone_canary_state{" + r + "} " + std::to_string(static_cast<int>(state_)) + "\n";
  for (int c = 0; c < 2; ++c)
    for (int e = 0; e < 2; ++e)
      (*out)["hone_canary_answers_total"] +=
          "hone_canary_answers_total{" +
          Labels({{"route", route_}, {"arm", c ? "candidate" : "baseline"}, {"outcome", e ? "error" : "ok"}}) + "} " +
          std::to_string(answers_[c][e]) + "\n";
  for (const auto& [d, n] : decisions_)
    (*out)["hone_canary_decisions_total"] += "hone_canary_decisions_total{" +
                                             Labels({{"route", route_}, {"decision", d}}) + "} " +
                                             std::to_string(n) + "\n";
  std::string& p99 = (*out)["hone_canary_window_p99_seconds"];
  for (int c = 0; c < 2; ++c) {
    const Window& w = c ? candidate_ : baseline_;
    const char* arm = c ? "candidate" : "baseline";
    p99 += "hone_canary_window_p99_seconds{" + Labels({{"route", route_}, {"arm", arm}, {"kind", "ttft"}}) + "} " +
           std::to_string(P99(w.ttft)) + "\n";
    p99 += "hone_canary_window_p99_seconds{" + Labels({{"route", route_}, {"arm", arm}, {"kind", "total"}}) + "} " +
           std::to_string(P99(w.total)) + "\n";
  }
}

}  // namespace hone::route
