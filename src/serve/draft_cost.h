// What a draft costs and what it is expected to give, for the scheduler's
// speculative decoding (serve/scheduler_spec.cc).
//
// A decode step's time grows with the tokens it carries: t(n) = fixed +
// per_token * n. Where decode is memory-bound (a big model, few cores busy
// on compute) per_token is small and checking k drafts costs about one step;
// where it is compute-bound (a small model, or a batch already full of other
// slots' tokens) each draft costs nearly a step of its own. Drafting k tokens
// after a slot's next token, each kept with probability a given the ones
// before it, adds a + a^2 + ... + a^k tokens on average. A step is worth
// drafting when the step's tokens per second go up: the slot's expected gain
// against the time the drafts add.
#pragma once

namespace hone::serve {

// Decayed least squares of step seconds on step tokens, over decode-only
// steps (no prompt tokens). Not thread-safe: the scheduler thread owns it.
class StepCost {
 public:
  void Record(int tokens, double seconds);
  // Enough steps to use the fit at all, and of different sizes to trust the slope.
  bool measured() const;
  bool known() const;
  // Seconds of a decode step with this many tokens. Until the slope is
  // known, a token beyond the measured steps is assumed to cost a tenth of
  // a step (memory-bound, the optimistic guess that lets drafting start
  // and so measure its cost).
  double Seconds(int tokens) const;
  double per_token() const;
  double fixed() const;

 private:
  // Decayed sums over recent steps: weight, n, t, n*n, n*t.
  double w_ = 0, sn_ = 0, st_ = 0, snn_ = 0, snt_ = 0;
};

// The share of drafted tokens kept, each given the ones before it were: a
// draft of k that keeps j is j successes and, if j < k, one failure. Counted
// per token, not per draft, so one early miss after long drafts kept whole
// (an answer ngram-mod has seen) barely moves it; older drafts fade by
// `decay` per draft, and `prior` weighs as two tokens until drafts come.
class DraftAcceptance {
 public:
  explicit DraftAcceptance(double prior = 0.5, double decay = 0.8) : prior_(prior), decay_(decay) {}
  void Record(int drafted, int kept);
  double value() const { return (kept_ + 2 * prior_) / (trials_ + 2); }

 private:
  double prior_, decay_;
  double kept_ = 0, trials_ = 0;  // decayed sums
};

// Expected tokens kept from k drafts when each is kept with probability a
// (after the ones before it were).
double ExpectedKept(int k, double acceptance);

// The number of draft tokens, 0..max_len, for one slot that gives the step
// the most tokens per second: the step already carries `step_tokens` tokens
// that emit `step_emitted` on their own. 0 when no draft length beats the
// step without it by at least `min_gain` (1.0: any gain; 1.02: 2% better).
// `own_pass`: where llama.cpp runs the drafts as a forward pass of their own
// (one KV stream per slot, other slots in the step), the cost of a pass of
// one sequence's tokens; the step then costs cost(step_tokens) + own_pass(k).
int BestDraftLength(const StepCost& cost, int step_tokens, double step_emitted, double acceptance,
                    int max_len, double min_gain, const StepCost* own_pass = nullptr);

}  // namespace hone::serve
