// Speculative decoding per slot, inside continuous batching (--spec).
//
// Each step, a generating slot may put drafted tokens after its next token
// in the same batch as every other slot's work, each with its logits. Then
// the slot's own sampler runs at each position in turn: the token it samples
// is emitted, and the next draft is kept only if it equals that token. So
// the output is what decoding one token at a time would give (a
// deterministic draft turns llama.cpp's accept rule into this comparison):
// greedy output is the same tokens, and a sampled one keeps its
// distribution, its grammar and its penalties. The KV of the drafts that were
// not kept is cut back.
//
// Each step a cost model (serve/draft_cost.h: what a token adds to a decode
// step on this machine, and each slot's share of drafts kept) caps a slot's
// draft at the length that raises the step's expected tokens per second, or
// none: on a compute-bound machine, or beside a batch full of other slots'
// tokens, a draft that may miss costs more than it is expected to give.
//
// Drafting adapts per slot: the draft length doubles while every draft is
// kept and halves when fewer than half are; after four steps in a row with
// nothing kept the slot sits out 16 steps, so a workload where drafts miss
// pays almost nothing. And per model, by cost: decode-only steps measure
// tokens emitted per second with drafts and without (every 128 drafting
// steps, 8 without refresh the latter); when drafting gives less than 97%
// of plain decoding (--spec-min-gain; a model so small that a step costs the same work per
// token, or drafts that are kept too rarely), drafting stops for 256 steps,
// twice as long each time it loses again (up to 4096), so a model where it
// never pays spends a small and shrinking share of its steps finding that out.
// The first plain probe comes as soon as drafting has its samples, not after
// 128 steps: a short-lived server or a slow model would lose much of its
// life in that first stretch.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "serve/scheduler.h"
#include "serve/scheduler_slot.h"

namespace hone::serve {

namespace {
constexpr int kMissesBeforePause = 4;
constexpr int kPauseSteps = 16;
constexpr int kProbeEvery = 128;       // drafting steps between plain probes
constexpr int kProbeSteps = 8;         // plain steps per probe
constexpr int kMinSamples = 8;         // of each kind before comparing
constexpr int kOffSteps = 256;         // steps without drafting when it does not pay ...
constexpr int kMaxOffSteps = 4096;     // ... doubling while it keeps losing
constexpr int kExploreEvery = 64;      // steps a slot the cost model holds back waits to measure again
constexpr double kMinStepGain = 1.02;  // drafts must promise this much more tokens per second
}  // namespace

bool Scheduler::SpecAllowedNow() {
  if (opt_.spec_min_gain <= 0) return true;
  if (spec_off_steps_ > 0) {
    --spec_off_steps_;
    return false;
  }
  // No plain baseline yet, or a probe is due: decode without drafts.
  const bool no_baseline = plain_samples_ < kMinSamples && spec_samples_ >= kMinSamples;
  if (no_baseline || ++spec_steps_since_probe_ >= kProbeEvery) {
    spec_steps_since_probe_ = 0;
    spec_off_steps_ = kProbeSteps - 1;
    return false;
  }
  return true;
}

void Scheduler::MeasureSpec(bool drafted, double seconds, int emitted) {
  if (seconds <= 0 || emitted <= 0) return;
  const double rate = emitted / seconds;
  double& ewma = drafted ? spec_rate_ : plain_rate_;
  int& n = drafted ? spec_samples_ : plain_samples_;
  ewma = n == 0 ? rate : ewma + 0.2 * (rate - ewma);
  ++n;
  if (!drafted || spec_samples_ < kMinSamples || plain_samples_ < kMinSamples) return;
  if (spec_rate_ < opt_.spec_min_gain * plain_rate_) {
    spec_off_steps_ = spec_off_length_;
    spec_off_length_ = std::min(spec_off_length_ * 2, kMaxOffSteps);
    spec_samples_ = 0;  // measured afresh when drafting resumes
  } else {
    spec_off_length_ = kOffSteps;
  }
}

// The most a slot may draft this step: --spec-max, the room left in its
// context (next, the drafts and the bonus token), and no draft past the
// answer's end (next is one token of it).
int Scheduler::DraftRoom(const Slot& s) const {
  int n = std::min(opt_.spec_max, opt_.ctx_per_slot - static_cast<int>(s.cached.size()) - 2);
  if (s.job->max_tokens >= 0) n = std::min(n, s.job->max_tokens - s.result.completion_tokens - 1);
  return std::max(0, n);
}

// How many of `available` draft tokens the slot puts in this step: its
// earned length, and only as many as raise the step's tokens per second; a
// slot held back drafts one token now and then, so its share is measured
// again (n-gram drafts cost nothing to find, only to check).
int Scheduler::DraftLength(Slot& s, int available, int step_tokens, double step_emitted, bool own_pass) {
  if (s.spec_pause > 0) {
    --s.spec_pause;
    return 0;
  }
  int n = std::min(available, s.spec_len);
  if (n <= 0 || opt_.spec_min_gain <= 0) return std::max(0, n);
  // No step of one slot seen yet: price the pass as a step of all slots.
  const StepCost* pass = own_pass ? (pass_cost_.measured() ? &pass_cost_ : &step_cost_) : nullptr;
  const int worth =
      BestDraftLength(step_cost_, step_tokens, step_emitted, s.spec_accept.value(), n, kMinStepGain, pass);
  if (worth == 0 && ++s.spec_idle < kExploreEvery) return 0;
  if (worth == 0) s.spec_idle = 0;
  return std::max(1, std::min(n, worth));
}

void Scheduler::PlanDrafts(const std::vector<Slot*>& decoding, int budget) {
  // With one KV stream per slot, llama.cpp runs a step whose slots carry
  // different token counts as several forward passes (split_equal), each a
  // read of all weights: a draft beside other slots is charged a pass of its
  // own (priced by the fit of one sequence's passes), so it pays only where
  // it is likely to be kept (bench/spec_vs_llama_server.py, 4 and 8 clients at ~70%
  // kept: drafting beside others in split streams lost 4-6%; with answers
  // ngram-mod has seen, 95% kept, 64-token drafts win several times over).
  const bool split_passes = decoding.size() > 1 && !UsesSharedKv(opt_);
  // The step as planned so far: every slot's next token, and the drafts
  // (with the tokens they are expected to keep) given out before this slot.
  int step_tokens = static_cast<int>(decoding.size());
  double step_emitted = step_tokens;
  if (!drafter_->has_draft_model()) {
    // N-gram drafts cost next to nothing to find (ngram-mod adds the n-grams
    // of the history it is shown to its pool, which repeated answers then
    // hit, and keeps it current when asked often): every generating slot asks
    // every step, and each draft is then trimmed to what pays, its length known.
    for (Slot* s : decoding)
      if (int room = DraftRoom(*s); room > 0) drafter_->Ask(s->id, s->cached, s->next, room);
    drafter_->DraftAsked();
    for (Slot* s : decoding) {
      s->planned = drafter_->Take(s->id);
      const int offered = std::min(static_cast<int>(s->planned.size()), budget);
      const int n = offered <= 0 ? 0 : DraftLength(*s, offered, step_tokens, step_emitted, split_passes);
      s->planned.resize(static_cast<size_t>(n));
      if (n == 0) drafter_->Accept(s->id, 0, 0);
      budget -= n;
      step_tokens += n;
      step_emitted += ExpectedKept(n, s->spec_accept.value());
    }
    return;
  }
  // A draft model costs a forward pass per drafted position: decide first.
  for (Slot* s : decoding) {
    const int room = std::min(DraftRoom(*s), budget);
    const int n = room > 0 ? DraftLength(*s, room, step_tokens, step_emitted, split_passes) : 0;
    if (n <= 0) continue;
    drafter_->Ask(s->id, s->cached, s->next, n);
    budget -= n;
    step_tokens += n;
    step_emitted += ExpectedKept(n, s->spec_accept.value());
  }
  drafter_->DraftAsked();
  for (Slot* s : decoding) s->planned = drafter_->Take(s->id);
}

// A decode-only step's cost, in the fits it belongs to: a step of one
// generating slot (drafts included) is one pass of one sequence, what drafts
// beside other slots cost on top of their step in per-slot KV streams; a
// step of several slots that carried drafts there ran as several passes and
// fits neither line.
void Scheduler::RecordStepCost(size_t slots_decoding, int tokens, int drafts, double seconds) {
  if (slots_decoding == 1) pass_cost_.Record(tokens, seconds);
  if (slots_decoding > 1 && drafts > 0 && !UsesSharedKv(opt_)) return;
  step_cost_.Record(tokens, seconds);
}

void Scheduler::SampleDrafted(Slot& s) {
  const size_t drafted = s.draft.size();
  size_t kept = 0;
  // The KV holds next and every draft. Until a draft is kept, the slot's
  // tokens are next alone, as OnToken sees them (its context check).
  s.cached.resize(s.step_from + 1);
  s.result.draft_tokens += static_cast<int>(drafted);
  try {
    for (size_t i = 0; i <= drafted; ++i) {
      const int index = i == 0 ? s.logits_index : s.draft_index[i - 1];
      const engine::Token t = s.sampler->Sample(*session_, index);
      OnToken(s, t);  // emits it; may end the answer (a stop, the length, end of text)
      if (!s.job || i == drafted || t != s.draft[i]) break;
      s.cached.push_back(t);
      ++kept;
      ++s.result.accepted_tokens;
    }
  } catch (const std::exception& e) {
    if (s.job) FinishSlot(s, Finish::kError, std::string("sampling failed: ") + e.what());
  }
  // Cut the drafts that were not kept out of the KV.
  if (kept < drafted && !session_->TruncateSequence(s.id, static_cast<int>(s.cached.size()))) {
    session_->ClearSequence(s.id);
    s.cached.clear();
    if (s.job)
      FinishSlot(s, Finish::kError, "speculative decoding: the rejected drafts could not be cut back");
  }
  drafter_->Accept(s.id, static_cast<int>(drafted), static_cast<int>(kept));
  s.spec_accept.Record(static_cast<int>(drafted), static_cast<int>(kept));
  spec_accept_.Record(static_cast<int>(drafted), static_cast<int>(kept));
  metrics_->Add(metric::kSpecDrafted, name_, static_cast<double>(drafted));
  metrics_->Add(metric::kSpecAccepted, name_, static_cast<double>(kept));
  if (kept == drafted) {
    s.spec_len = std::min(s.spec_len * 2, opt_.spec_max);
  } else if (kept * 2 < drafted) {
    s.spec_len = std::max(1, s.spec_len / 2);
  }
  s.spec_misses = kept == 0 ? s.spec_misses + 1 : 0;
  if (s.spec_misses >= kMissesBeforePause) {
    s.spec_misses = 0;
    s.spec_pause = kPauseSteps;
  }
  s.draft.clear();
  s.draft_index.clear();
}

void Scheduler::OpenStepTrace() {
  const char* path = std::getenv("HONE_STEP_TRACE");
  if (!path || !*path) return;
  step_trace_ = std::fopen(path, "a");
  if (!step_trace_) {
    std::fprintf(stderr, "hone serve: HONE_STEP_TRACE: cannot open %s\n", path);
    return;
  }
  // One header per file: several models (and reloads) append to it.
  std::fseek(step_trace_, 0, SEEK_END);
  if (std::ftell(step_trace_) > 0) return;
  std::fprintf(step_trace_,
               "model,step,decode_tokens,prefill_tokens,drafted,emitted,decode_s,whole_s,fit_fixed_s,fit_per_"
               "token_s\n");
}

void Scheduler::TraceStep(int decode_tokens, int prefill_tokens, int drafted, double decode_s,
                          double whole_s) {
  std::fprintf(step_trace_, "%s,%lld,%d,%d,%d,%d,%.6f,%.6f,%.6f,%.6f\n", name_.c_str(),
               static_cast<long long>(steps_.load()), decode_tokens, prefill_tokens, drafted,
               tokens_this_step_, decode_s, whole_s, step_cost_.fixed(), step_cost_.per_token());
}

}  // namespace hone::serve
