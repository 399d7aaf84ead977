#include "serve/draft_cost.h"

#include <algorithm>

namespace hone::serve {

namespace {
constexpr double kDecay = 0.99;       // per step: about the last 100 steps weigh
constexpr double kMinWeight = 4;      // steps before the fit counts
constexpr double kMinVariance = 0.1;  // of step sizes (tokens^2): a slope needs spread
constexpr double kGuessShare = 0.1;   // of a step, per token, until measured
}  // namespace

void StepCost::Record(int tokens, double seconds) {
  if (tokens <= 0 || seconds <= 0) return;
  const double n = tokens;
  w_ = kDecay * w_ + 1;
  sn_ = kDecay * sn_ + n;
  st_ = kDecay * st_ + seconds;
  snn_ = kDecay * snn_ + n * n;
  snt_ = kDecay * snt_ + n * seconds;
}

bool StepCost::measured() const { return w_ >= kMinWeight; }

bool StepCost::known() const {
  if (w_ < kMinWeight) return false;
  const double mean_n = sn_ / w_;
  return snn_ / w_ - mean_n * mean_n >= kMinVariance;
}

double StepCost::per_token() const {
  if (w_ <= 0) return 0;
  const double mean_n = sn_ / w_, mean_t = st_ / w_;
  if (!known()) return kGuessShare * mean_t;
  const double variance = snn_ / w_ - mean_n * mean_n;
  return std::max(0.0, (snt_ / w_ - mean_n * mean_t) / variance);
}

double StepCost::fixed() const {
  if (w_ <= 0) return 0;
  return std::max(0.0, st_ / w_ - per_token() * sn_ / w_);
}

double StepCost::Seconds(int tokens) const { return fixed() + per_token() * tokens; }

void DraftAcceptance::Record(int drafted, int kept) {
  if (drafted <= 0) return;
  kept_ = decay_ * kept_ + kept;
  trials_ = decay_ * trials_ + kept + (kept < drafted ? 1 : 0);
}

double ExpectedKept(int k, double acceptance) {
  double kept = 0, p = 1;
  for (int i = 0; i < k; ++i) kept += (p *= acceptance);
  return kept;
}

int BestDraftLength(const StepCost& cost, int step_tokens, double step_emitted, double acceptance,
                    int max_len, double min_gain, const StepCost* own_pass) {
  if (max_len <= 0) return 0;
  const double base_s = cost.Seconds(step_tokens);
  if (base_s <= 0) return max_len;  // nothing measured yet: draft, and so measure
  const double base_rate = step_emitted / base_s;
  int best = 0;
  double best_rate = base_rate * min_gain;
  for (int k = 1; k <= max_len; ++k) {
    const double seconds =
        own_pass ? cost.Seconds(step_tokens) + own_pass->Seconds(k) : cost.Seconds(step_tokens + k);
    const double rate = (step_emitted + ExpectedKept(k, acceptance)) / seconds;
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

}  // namespace hone::serve
