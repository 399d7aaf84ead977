// The search: which configurations to measure, in what order, and when to stop.
// Independent of llama.cpp: it drives a MeasureFn, so unit tests can give it a
// deterministic objective and a simulated clock.
//
// Default search (coordinate racing): starting from llama.cpp's defaults, one
// dimension at a time (most important first), every value of that dimension is
// measured a few times, nearest to the incumbent's value first; clear losers
// (CI entirely below the leader, or >15% slower) are dropped, survivors get
// more repetitions until one is left, all are within 2% of the leader, or all
// reached max_reps, and the best mean becomes the new incumbent. Measured
// configurations are cached, so a second pass over the dimensions is cheap.
// Exhaustive (--exhaustive): every combination of the grid dimensions, each
// measured fully, then the same coordinate stages for the extra dimensions.
// Both re-measure the defaults between stages (drift) and finish with an
// interleaved default-vs-best comparison that gives the speedup and its CI.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tune/config.h"
#include "util/result.h"
#include "util/stats.h"

namespace hone::tune {

// One repetition of a trial.
struct Sample {
  double score = 0;   // higher is better (see the workload's objective)
  double ttft_s = 0;  // time to first token
  double prefill_tps = 0;
  double decode_tps = 0;     // per stream
  double seconds = 0;        // wall time this repetition took to measure
  double score_seconds = 0;  // the time the score divides by (weights repeated runs)
  double quality = 1;        // greedy-token agreement with the f16-KV reference, 0..1
  int affinity = -1;         // -1 not pinned, 0 pinning did not take effect, 1 verified
};

// Measures `reps` more repetitions of `config` (warming up first whenever the
// config's session is new). Errors (out of memory, unsupported combination)
// are recorded on the trial and the search goes on.
using MeasureFn = std::function<Result<std::vector<Sample>>(const Config& config, int reps)>;

struct Trial {
  int id = 0;
  std::string stage;  // "baseline", "drift", a dimension name, "grid", "final"
  Config config;
  std::vector<Sample> samples;
  std::string error;     // non-empty when the trial failed
  bool dropped = false;  // raced out as a clear loser
  double seconds = 0;    // measuring time spent on it
  Summary score;
  double mean(double Sample::*field) const;
};

struct Dimension {
  std::string name;
  struct Value {
    std::string label;
    std::function<void(Config&)> apply;
  };
  std::vector<Value> values;
};

struct SearchSpace {
  Config defaults;
  // Searched one at a time before anything else: the shape of the workload
  // (the server's slot count), which every other setting is measured under.
  std::vector<Dimension> early;
  std::vector<Dimension> grid;   // searched jointly by --exhaustive
  std::vector<Dimension> extra;  // always searched one at a time (reload or quality trade-offs)
  std::function<bool(const Config&)> valid = [](const Config&) { return true; };
  size_t GridSize() const;  // valid, distinct grid combinations
};

struct SearchOptions {
  double budget_s = 300;  // for the default search; --exhaustive ignores it
  bool exhaustive = false;
  int min_reps = 2;
  int max_reps = 5;
  double cv_target = 0.03;      // above it a trial is measured again
  double drop_fraction = 0.15;  // a value this much slower than the leader is dropped
  // Racing stops once every survivor is within this fraction of the leader:
  // telling them apart would cost more repetitions than the difference is worth.
  double equivalence = 0.02;
  double min_quality = 0.95;      // a KV type that changes more greedy tokens is not chosen
  int final_pairs = 5;            // interleaved default/best repetitions at the end
  double reserve_fraction = 0.2;  // of the budget, kept for the final comparison
  std::function<double()> clock;  // seconds; default steady_clock
  std::function<void(const Trial&, double budget_fraction)> on_trial;
};

struct SearchResult {
  Config best;
  Summary best_score;
  Summary default_score;
  Summary speedup;             // best / default, paired ratios of the final comparison
  bool kept_defaults = false;  // the best was not faster than the defaults in the final comparison
  bool budget_exhausted = false;
  double measure_seconds = 0;  // time spent measuring (all trials)
  double max_drift = 0;        // largest |baseline change| seen, fraction
  std::vector<Trial> trials;
  std::vector<std::string> notes;
};

SearchResult Search(const SearchSpace& space, const MeasureFn& measure, const SearchOptions& options);

}  // namespace hone::tune
