// The search logic against deterministic objectives and a simulated clock:
// no llama.cpp here, so every property is checked exactly.
#include "tune/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tune/search_space.h"

namespace hone::tune {
namespace {

// A 16-core, 2-socket machine with SMT: the space the search is designed for.
hw::MachineInfo BigMachine() {
  hw::MachineInfo m;
  m.physical_cores = 16;
  m.logical_cpus = 32;
  m.smt_per_core = 2;
  for (int n = 0; n < 2; ++n) m.numa_nodes.push_back({n, {}, 0});
  for (int c = 0; c < 16; ++c) {
    hw::Core core;
    core.id = c;
    core.numa_node = c / 8;
    core.cpus = {c, c + 16};
    m.cores.push_back(core);
    m.numa_nodes[c / 8].cpus.push_back(c);
    m.numa_nodes[c / 8].cpus.push_back(c + 16);
  }
  return m;
}

// Speed model: best at 8 decode threads on node0, 16 prefill threads, poll 0,
// ubatch 256, the full logical batch, flash attention on; q8_0 KV 3% faster;
// no-repack 20% slower.
double TrueScore(const Config& c) {
  double s = 100;
  s *= 1 - 0.04 * std::fabs(std::log2(c.threads / 8.0));
  s *= 1 - 0.03 * std::fabs(std::log2(c.threads_batch / 16.0));
  if (c.placement == "node0") s *= 1.05;
  if (c.strict_cpu) s *= 1.02;
  if (c.poll == 0) s *= 1.03;
  s *= 1 - 0.02 * std::fabs(std::log2(c.n_ubatch / 256.0));
  s *= 1 - 0.01 * std::log2(2048.0 / c.n_batch);
  if (c.flash_attn == engine::FlashAttn::kOn) s *= 1.04;
  if (c.kv_type == "q8_0") s *= 1.03;
  if (!c.repack) s *= 0.8;
  return s;
}

struct Sim {
  double now = 0;
  double noise = 0;  // relative standard deviation
  std::mt19937 rng{42};
  int calls = 0;
  std::function<Result<std::vector<Sample>>(const Config&, int)> fn(
      std::function<double(const Config&)> score) {
    return [this, score](const Config& c, int reps) -> Result<std::vector<Sample>> {
      ++calls;
      std::normal_distribution<double> n(0, noise);
      std::vector<Sample> out;
      now += 1;  // warm-up
      for (int i = 0; i < reps; ++i) {
        Sample s;
        s.score = score(c) * (1 + (noise > 0 ? n(rng) : 0));
        s.seconds = 1;
        now += 1;
        out.push_back(s);
      }
      return out;
    };
  }
  SearchOptions Options(double budget, bool exhaustive) {
    SearchOptions o;
    o.budget_s = budget;
    o.exhaustive = exhaustive;
    o.clock = [this] { return now; };
    return o;
  }
};

SearchSpace Space() {
  SpaceRequest r;
  r.prompt_tokens = 512;
  return BuildSearchSpace(BigMachine(), r);
}

TEST(Search, DefaultSearchMatchesExhaustiveBestInAQuarterOfItsTime) {
  SearchSpace space = Space();
  Sim grid_sim, fast_sim;
  SearchResult grid = Search(space, grid_sim.fn(TrueScore), grid_sim.Options(0, true));
  SearchResult fast = Search(space, fast_sim.fn(TrueScore), fast_sim.Options(1e9, false));
  EXPECT_EQ(fast.best.Key(), grid.best.Key());
  EXPECT_NEAR(TrueScore(fast.best), TrueScore(grid.best), 0.02 * TrueScore(grid.best));
  EXPECT_LE(fast.measure_seconds, 0.25 * grid.measure_seconds)
      << fast.measure_seconds << " vs grid " << grid.measure_seconds;
  EXPECT_EQ(fast.best.threads, 8);
  EXPECT_EQ(fast.best.placement, "node0");
  EXPECT_EQ(fast.best.kv_type, "q8_0");
  EXPECT_TRUE(fast.best.repack);
  EXPECT_GT(fast.speedup.mean, 1.2);
}

TEST(Search, NoisyMeasurementsStayWithinTwoPercentOfTheTrueBest) {
  SearchSpace space = Space();
  double truth = 0;
  Sim g;
  truth = TrueScore(Search(space, g.fn(TrueScore), g.Options(0, true)).best);
  for (int seed = 1; seed <= 3; ++seed) {
    Sim s;
    s.noise = 0.01;
    s.rng.seed(seed);
    SearchResult r = Search(space, s.fn(TrueScore), s.Options(1e9, false));
    EXPECT_GE(TrueScore(r.best), 0.98 * truth) << r.best.Key();
  }
}

TEST(Search, StaysWithinTheBudgetAndKeepsTheBestSoFar) {
  Sim s;
  SearchResult r = Search(Space(), s.fn(TrueScore), s.Options(40, false));
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_LE(s.now, 40 + 2);  // at most one trial's overshoot
  EXPECT_GE(TrueScore(r.best), TrueScore(Space().defaults));
}

TEST(Search, FailedTrialsAreRecordedAndSkipped) {
  Sim s;
  auto base = s.fn(TrueScore);
  MeasureFn fn = [&](const Config& c, int reps) -> Result<std::vector<Sample>> {
    if (c.n_ubatch == 64) return MakeError(ErrorCode::kOutOfMemory, "compute buffer too large");
    return base(c, reps);
  };
  SearchResult r = Search(Space(), fn, s.Options(1e9, false));
  int failed = 0;
  for (const Trial& t : r.trials) {
    if (!t.error.empty()) {
      ++failed;
      EXPECT_NE(t.error.find("compute buffer"), std::string::npos);
      EXPECT_TRUE(t.samples.empty());
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_EQ(r.best.n_ubatch, 256);
}

TEST(Search, AKvTypeThatChangesTheOutputIsNotChosen) {
  Sim s;
  auto base = s.fn(TrueScore);
  MeasureFn fn = [&](const Config& c, int reps) -> Result<std::vector<Sample>> {
    auto r = base(c, reps);
    if (r && c.kv_type != "f16")
      for (Sample& x : *r) x.quality = 0.5;
    return r;
  };
  SearchResult r = Search(Space(), fn, s.Options(1e9, false));
  EXPECT_EQ(r.best.kv_type, "f16");
}

TEST(Search, KeepsTheDefaultsWhenTheWinnerIsSlowerInTheFinalComparison) {
  Sim s;
  auto base = s.fn(TrueScore);
  bool final_phase = false;
  Config defaults = Space().defaults;
  SearchOptions o = s.Options(1e9, false);
  int trials_seen = 0;
  o.on_trial = [&](const Trial&, double) { ++trials_seen; };
  // After the search proper, anything but the defaults turns out slower
  // (a winner that was lucky): the final interleaved comparison must catch it.
  MeasureFn fn = [&](const Config& c, int reps) -> Result<std::vector<Sample>> {
    auto r = base(c, reps);
    if (final_phase && r && !(c == defaults))
      for (Sample& x : *r) x.score *= 0.5;
    return r;
  };
  // The final comparison is the only place that measures single repetitions
  // alternately after on_trial stops firing; switch when the search has run long.
  MeasureFn wrapped = [&](const Config& c, int reps) {
    if (trials_seen > 40) final_phase = true;
    return fn(c, reps);
  };
  SearchResult r = Search(Space(), wrapped, o);
  ASSERT_TRUE(final_phase);
  EXPECT_TRUE(r.kept_defaults);
  EXPECT_EQ(r.best.Key(), defaults.Key());
  EXPECT_DOUBLE_EQ(r.speedup.mean, 1.0);
}

TEST(Search, ReMeasuresTheBaselineBetweenStages) {
  Sim s;
  SearchResult r = Search(Space(), s.fn(TrueScore), s.Options(300, false));  // every 30 s
  int drift = 0;
  for (const Trial& t : r.trials) {
    if (t.stage != "drift") continue;
    ++drift;
    EXPECT_EQ(t.config.Key(), Space().defaults.Key());
  }
  EXPECT_GE(drift, 2);
  EXPECT_LE(drift, 10);
  EXPECT_NEAR(r.max_drift, 0, 1e-9);  // a deterministic objective does not drift

  // A neighbour halves the speed halfway through: the drift check sees it.
  Sim hot;
  auto base = hot.fn(TrueScore);
  MeasureFn slowing = [&](const Config& c, int reps) -> Result<std::vector<Sample>> {
    auto out = base(c, reps);
    if (out && hot.now > 100)
      for (Sample& x : *out) x.score *= 0.5;
    return out;
  };
  SearchResult h = Search(Space(), slowing, hot.Options(300, false));
  EXPECT_GT(h.max_drift, 0.4);
}

TEST(Search, ExhaustiveMeasuresEveryValidGridConfiguration) {
  Sim s;
  SearchSpace space = Space();
  SearchResult r = Search(space, s.fn(TrueScore), s.Options(0, true));
  std::set<std::string> grid_keys;
  for (const Trial& t : r.trials) {
    if (t.stage == "grid" || t.stage == "baseline") grid_keys.insert(t.config.Key());
  }
  EXPECT_GE(grid_keys.size(), space.GridSize());
}

// Seen on a 16-core machine: the budget ran out after the threads stage had
// measured only one newcomer (t=1, far worse), which then replaced the
// defaults. The incumbent races in its own stage, and neighbours go first.
TEST(Search, ABudgetEndingMidStageNeverTradesTheIncumbentForAWorseValue) {
  Sim s;
  auto by_threads = [](const Config& c) { return 10.0 * c.threads; };  // the defaults (16) are best
  std::vector<int> measured;
  MeasureFn fn = [&](const Config& c, int reps) {
    measured.push_back(c.threads);
    return s.fn(by_threads)(c, reps);
  };
  // Baseline (1 warm-up + 2 reps, 3 s) plus room for one more trial before the
  // 20% reserve: 3 + 1.5 * 3 <= 0.8 * 11 < 6 + 1.5 * 3.
  SearchResult r = Search(Space(), fn, s.Options(11, false));
  EXPECT_EQ(r.best.threads, 16);
  EXPECT_TRUE(r.kept_defaults);
  ASSERT_GE(measured.size(), 2u);
  EXPECT_EQ(measured[1], 15);  // the neighbour of 16, not 1
}

// Seen there too: a candidate that measured 0.875 of the defaults in the final
// comparison (inside its wide CI) was handed out. Slower on average: not kept.
TEST(Search, AWinnerSlowerOnAverageInTheFinalComparisonIsNotKept) {
  Sim s;
  bool final_phase = false;
  int final_winner_reps = 0;
  Config defaults = Space().defaults;
  SearchOptions o = s.Options(1e9, false);
  int trials_seen = 0;
  o.on_trial = [&](const Trial&, double) { ++trials_seen; };
  auto base = s.fn(TrueScore);
  MeasureFn fn = [&](const Config& c, int reps) -> Result<std::vector<Sample>> {
    if (trials_seen > 40) final_phase = true;
    auto r = base(c, reps);
    // In the final comparison the winner runs at 0.80 and 1.10 of the defaults
    // by turns: 0.92 on average, with a CI wide enough to reach past 1.
    if (final_phase && r && !(c == defaults)) {
      for (Sample& x : *r) x.score = TrueScore(defaults) * (final_winner_reps++ % 2 == 0 ? 0.80 : 1.10);
    }
    return r;
  };
  SearchResult r = Search(Space(), fn, o);
  ASSERT_TRUE(final_phase);
  ASSERT_GE(final_winner_reps, 3);
  EXPECT_TRUE(r.kept_defaults);
  EXPECT_EQ(r.best.Key(), defaults.Key());
  EXPECT_DOUBLE_EQ(r.speedup.mean, 1.0);
}

}  // namespace
}  // namespace hone::tune
