// `hone tune`'s speculation stage: after the run parameters are chosen, it
// measures speculative decoding on this machine and model.
// - The cost curve t(k+1)/t(1): one decode of k drafts plus the next token
//   for one sequence, against one token alone. Where it stays near 1 (a
//   memory-bound model), each kept draft is nearly free.
// - Greedy generation on the workload's prompts with each option (none, each
//   n-gram mode, n-gram sizes, the draft model if given, draft lengths), each
//   repetition paired with one without speculation, in rotating order.
// The choice is the fastest option whose speedup's 95% CI lies above 1, and
// still does in fresh rounds against none alone; otherwise none. Random-weight models make acceptance
// meaningless: measure with the model and prompts you serve.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "tune/config.h"
#include "tune/profile.h"
#include "util/result.h"
#include "util/stats.h"

namespace hone::tune {

struct SpecTuneRequest {
  std::string draft;                 // a draft model file; empty: n-gram modes only
  std::vector<std::string> prompts;  // empty: DefaultSpecPrompts()
  int gen_tokens = 64;               // greedy tokens per generation
  int reps = 3;                      // paired repetitions per option and prompt
};

struct SpecOption {
  std::string mode = "none";
  int ngram = 0;  // 0: llama.cpp's default
  int max_draft = 64;
  Summary tps;            // generated tokens per second
  Summary speedup;        // over none, paired per repetition
  int drafted = 0;        // draft tokens over all runs
  double acceptance = 0;  // drafts kept / drafted
  std::string Key() const;
};

struct SpecTuneResult {
  std::vector<int> cost_k;          // k drafts ...
  std::vector<double> cost_curve;   // ... cost t(k+1)/t(1)
  std::vector<SpecOption> options;  // options[0] is none
  SpecOption confirmed;             // the best option's fresh rounds against none (mode "none": none paid)
  SpecChoice choice;
};

// Prompts whose answers restate what they hold (support replies, in English
// and Chinese) and a story opening.
std::vector<std::string> DefaultSpecPrompts();

// The speedup k drafts would give at acceptance rate `a` per draft (each
// kept independently), from the cost curve: E[tokens per step] / cost.
double ProjectedSpeedup(double a, int k, double cost);

// `session`: the tuned context for the target (one sequence); `load`: how
// to load the draft model. `progress(done, total, what)` after each step.
Result<SpecTuneResult> TuneSpeculation(engine::Session& session, const engine::LoadOptions& load,
                                       const SpecTuneRequest& request,
                                       const std::function<void(int, int, const std::string&)>& progress);

// Loads the model with the tuned run parameters `best` (one sequence) and
// measures as above.
Result<SpecTuneResult> TuneSpeculation(const std::string& model_path, const Config& best,
                                       const SpecTuneRequest& request,
                                       const std::function<void(int, int, const std::string&)>& progress);

// `hone bench --spec`: one option against none on a loaded session, in
// paired rounds over the prompts, and whether its greedy tokens equal
// none's (a model type whose batch kernels round differently from single
// steps would show it here).
struct SpecBenchResult {
  SpecOption option;  // its tok/s, speedup over none, acceptance
  Summary none_tps;
  int generations = 0;  // pairs compared
  int differing = 0;    // of those, greedy tokens not equal to none's
};
// "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", or
// "draft-simple" (needs a draft model), with llama.cpp's defaults.
Result<SpecOption> ParseSpecMode(const std::string& mode, bool has_draft);
Result<SpecBenchResult> MeasureSpecOption(engine::Session& session, const engine::LoadOptions& load,
                                          const SpecTuneRequest& request, const SpecOption& option);

// Before any measuring: the draft model loads and shares the target's
// vocabulary (llama.cpp's rule), else a clear error.
Status CheckDraft(const std::string& model_path, const std::string& draft_path);

// The llama-server flags for the choice (empty for none).
std::string LlamaServerSpecFlags(const SpecChoice& c);

}  // namespace hone::tune
