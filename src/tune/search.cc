#include "tune/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

namespace hone::tune {

double Trial::mean(double Sample::*field) const {
  if (samples.empty()) return 0;
  double s = 0;
  for (const Sample& x : samples) s += x.*field;
  return s / samples.size();
}

namespace {

// Every combination of the dimensions' values applied to `base`, in order.
std::vector<Config> Product(const Config& base, const std::vector<Dimension>& dims) {
  std::vector<Config> out{base};
  for (const Dimension& d : dims) {
    std::vector<Config> next;
    for (const Config& c : out) {
      for (const Dimension::Value& v : d.values) {
        Config x = c;
        v.apply(x);
        next.push_back(x);
      }
    }
    out.swap(next);
  }
  return out;
}

class Searcher {
 public:
  Searcher(const SearchSpace& space, const MeasureFn& measure, const SearchOptions& o)
      : space_(space), measure_(measure), o_(o) {
    if (!o_.clock) {
      o_.clock = [] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      };
    }
    start_ = o_.clock();
  }

  SearchResult Run() {
    int base = Measure(space_.defaults, "baseline", o_.min_reps);
    if (!result_.trials[base].error.empty()) {
      result_.notes.push_back("the defaults failed to run: " + result_.trials[base].error);
      result_.best = space_.defaults;
      return Finish(base, base);
    }
    baseline_ = result_.trials[base].score.mean;
    default_seconds_ =
        result_.trials[base].seconds / std::max<size_t>(1, result_.trials[base].samples.size());
    last_drift_ = Elapsed();
    int inc = base;
    for (const Dimension& d : space_.early) inc = Stage(d, inc);
    if (!o_.exhaustive) {
      std::string start = result_.trials[inc].config.Key();
      for (const Dimension& d : space_.grid) inc = Stage(d, inc);
      for (const Dimension& d : space_.extra) inc = Stage(d, inc);
      // A second pass catches interactions (the best thread count can move with
      // the placement); measured configurations are cached, so it is cheap.
      if (result_.trials[inc].config.Key() != start && !OutOfBudget()) {
        for (const Dimension& d : space_.grid) inc = Stage(d, inc);
      }
    } else {
      inc = Grid(inc);
      for (const Dimension& d : space_.extra) inc = Stage(d, inc);
    }
    result_.best = result_.trials[inc].config;
    return Finish(base, inc);
  }

 private:
  // Measures `reps` more repetitions of a config (cached by key); returns the trial index.
  int Measure(const Config& c, const std::string& stage, int reps) {
    auto it = by_key_.find(c.Key());
    int idx;
    if (it == by_key_.end()) {
      Trial t;
      t.id = static_cast<int>(result_.trials.size());
      t.stage = stage;
      t.config = c;
      result_.trials.push_back(t);
      idx = t.id;
      by_key_[c.Key()] = idx;
    } else {
      idx = it->second;
    }
    Trial& t = result_.trials[idx];
    if (!t.error.empty() || reps <= 0) return idx;
    double t0 = o_.clock();
    auto samples = measure_(c, reps);
    double spent = o_.clock() - t0;
    t.seconds += spent;
    result_.measure_seconds += spent;
    if (!samples) {
      t.error = samples.error().ToString();
    } else {
      t.samples.insert(t.samples.end(), samples->begin(), samples->end());
      std::vector<double> scores;
      for (const Sample& s : t.samples) scores.push_back(s.score);
      t.score = Summarize(scores);
      sample_seconds_ = spent / std::max(1, reps);
    }
    if (o_.on_trial) o_.on_trial(t, o_.budget_s > 0 ? (o_.clock() - start_) / o_.budget_s : 0);
    return idx;
  }

  double Elapsed() const { return o_.clock() - start_; }
  bool OutOfBudget(int reps = 1) {
    if (o_.exhaustive) return false;
    const double per = std::max(sample_seconds_, 0.5 * default_seconds_);
    bool out = Elapsed() + per * (reps + 1) > o_.budget_s * (1 - o_.reserve_fraction);
    if (out) result_.budget_exhausted = true;
    return out;
  }

  // Re-measures the defaults once: drift from heat or neighbours shows here.
  // At most every tenth of the budget (or every 10 s), so that a search with
  // many short stages does not spend its time re-measuring the baseline.
  void Drift() {
    const double every = o_.exhaustive ? 0 : std::max(10.0, o_.budget_s / 10);
    if (OutOfBudget() || Elapsed() - last_drift_ < every) return;
    last_drift_ = Elapsed();
    Trial t;
    t.id = static_cast<int>(result_.trials.size());
    t.stage = "drift";
    t.config = space_.defaults;
    double t0 = o_.clock();
    auto s = measure_(space_.defaults, 1);
    t.seconds = o_.clock() - t0;
    default_seconds_ = std::max(default_seconds_, t.seconds);
    result_.measure_seconds += t.seconds;
    if (s) {
      t.samples = *s;
      t.score = Summarize({s->front().score});
      if (baseline_ > 0)
        result_.max_drift = std::max(result_.max_drift, std::fabs(t.score.mean / baseline_ - 1));
    } else {
      t.error = s.error().ToString();
    }
    result_.trials.push_back(t);
    if (o_.on_trial) o_.on_trial(result_.trials.back(), Elapsed() / std::max(1e-9, o_.budget_s));
  }

  bool Eligible(const Trial& t) const {
    return t.error.empty() && !t.samples.empty() && t.mean(&Sample::quality) >= o_.min_quality;
  }

  // One coordinate stage: race every value of `d` applied to the incumbent.
  int Stage(const Dimension& d, int inc) {
    // The incumbent races too: when the budget runs out before its own value
    // comes up, a worse newcomer must not replace it by default.
    std::vector<int> alive;
    std::set<int> seen{inc};
    if (Eligible(result_.trials[inc])) alive.push_back(inc);
    const double spent_before = result_.measure_seconds;
    for (size_t k : NearestFirst(d, result_.trials[inc].config)) {
      const Dimension::Value& v = d.values[k];
      Config c = result_.trials[inc].config;
      v.apply(c);
      if (!space_.valid(c)) continue;
      auto it = by_key_.find(c.Key());
      int have = it == by_key_.end() ? 0 : static_cast<int>(result_.trials[it->second].samples.size());
      if (have < o_.min_reps && OutOfBudget(o_.min_reps - have)) break;
      int idx = Measure(c, d.name, o_.min_reps - have);
      if (seen.insert(idx).second && Eligible(result_.trials[idx])) alive.push_back(idx);
    }
    if (alive.empty()) return inc;
    for (;;) {
      int lead = *std::max_element(alive.begin(), alive.end(), [&](int a, int b) {
        return result_.trials[a].score.mean < result_.trials[b].score.mean;
      });
      const Summary& L = result_.trials[lead].score;
      std::vector<int> keep;
      for (int i : alive) {
        const Summary& s = result_.trials[i].score;
        bool clear_loser =
            i != lead && (s.mean + s.ci95 < L.mean - L.ci95 || s.mean < (1 - o_.drop_fraction) * L.mean);
        if (clear_loser)
          result_.trials[i].dropped = true;
        else
          keep.push_back(i);
      }
      alive.swap(keep);
      const bool equivalent = std::all_of(alive.begin(), alive.end(), [&](int i) {
        return result_.trials[i].score.mean >= (1 - o_.equivalence) * L.mean;
      });
      bool more = false;
      if (alive.size() > 1 && !equivalent) {
        for (int i : alive) {
          Trial& t = result_.trials[i];
          if (static_cast<int>(t.samples.size()) < o_.max_reps && !OutOfBudget()) {
            Measure(t.config, t.stage, 1);
            more = true;
          }
        }
      }
      if (!more) {
        // Nothing new measured (a converged second pass): no need to check drift.
        if (result_.measure_seconds > spent_before) Drift();
        return lead;
      }
    }
  }

  // Value indices ordered by distance from the incumbent's own value, so a
  // budget that runs out mid-stage has tried the likeliest neighbours (thread
  // counts next to the current one) rather than the far end of the range.
  std::vector<size_t> NearestFirst(const Dimension& d, const Config& inc) const {
    std::vector<size_t> order(d.values.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    size_t own = 0;
    for (size_t i = 0; i < d.values.size(); ++i) {
      Config c = inc;
      d.values[i].apply(c);
      if (c.Key() == inc.Key()) own = i;
    }
    auto dist = [own](size_t i) { return i > own ? i - own : own - i; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist(a) < dist(b); });
    return order;
  }

  int Grid(int inc) {
    int since_drift = 0;
    for (const Config& c : Product(result_.trials[inc].config, space_.grid)) {
      if (!space_.valid(c)) continue;
      int idx = Measure(c, "grid", 0);
      Trial& t = result_.trials[idx];
      int have = static_cast<int>(t.samples.size());
      if (have < o_.min_reps) idx = Measure(c, "grid", o_.min_reps - have);
      while (result_.trials[idx].error.empty() && result_.trials[idx].score.cv() > o_.cv_target &&
             static_cast<int>(result_.trials[idx].samples.size()) < o_.max_reps) {
        Measure(c, "grid", 1);
      }
      if (Eligible(result_.trials[idx]) && result_.trials[idx].score.mean > result_.trials[inc].score.mean)
        inc = idx;
      if (++since_drift % 10 == 0) Drift();
    }
    Drift();
    return inc;
  }

  // Interleaved default/best repetitions: a paired speedup with its CI.
  SearchResult Finish(int base, int inc) {
    result_.default_score = result_.trials[base].score;
    result_.best_score = result_.trials[inc].score;
    if (inc == base) {
      if (result_.trials[base].error.empty())
        result_.notes.push_back("no candidate beat the defaults; keeping them");
      result_.kept_defaults = true;
      result_.speedup = Summarize({1.0});
      return result_;
    }
    Trial fb, fd;
    fb.stage = fd.stage = "final";
    fb.config = result_.trials[inc].config;
    fd.config = space_.defaults;
    std::vector<double> ratios, sb, sd;
    for (int i = 0; i < o_.final_pairs; ++i) {
      // Two pairs at least (a CI needs them), more while the budget lasts.
      const double pair = std::max(2 * sample_seconds_, default_seconds_ + sample_seconds_);
      if (i >= 2 && !o_.exhaustive && Elapsed() + pair > o_.budget_s) break;
      double t0 = o_.clock();
      auto d = measure_(fd.config, 1);
      double t1 = o_.clock();
      auto b = measure_(fb.config, 1);
      fd.seconds += t1 - t0;
      fb.seconds += o_.clock() - t1;
      result_.measure_seconds += o_.clock() - t0;
      if (!d || !b || d->front().score <= 0) break;
      sd.push_back(d->front().score);
      sb.push_back(b->front().score);
      fd.samples.push_back(d->front());
      fb.samples.push_back(b->front());
      ratios.push_back(b->front().score / d->front().score);
    }
    if (ratios.empty()) {
      result_.notes.push_back("final comparison failed; keeping the defaults");
      result_.best = space_.defaults;
      result_.kept_defaults = true;
      result_.speedup = Summarize({1.0});
      return result_;
    }
    fd.score = Summarize(sd);
    fb.score = Summarize(sb);
    result_.speedup = Summarize(ratios);
    result_.best_score = fb.score;
    result_.default_score = fd.score;
    for (Trial* t : {&fd, &fb}) {
      t->id = static_cast<int>(result_.trials.size());
      result_.trials.push_back(*t);
    }
    // Never hand out a profile that measured slower than the defaults in the
    // paired comparison, even within noise: the defaults are the safe choice.
    if (result_.speedup.mean < 1.0) {
      result_.notes.push_back(
          "the best candidate was not faster than the defaults in the final comparison; "
          "keeping the defaults");
      result_.best = space_.defaults;
      result_.kept_defaults = true;
      result_.speedup = Summarize({1.0});
      result_.best_score = result_.default_score;
    }
    return result_;
  }

  const SearchSpace& space_;
  const MeasureFn& measure_;
  SearchOptions o_;
  SearchResult result_;
  std::map<std::string, int> by_key_;
  double start_ = 0;
  double sample_seconds_ = 0;
  double baseline_ = 0;
  double last_drift_ = 0;
  double default_seconds_ = 0;  // slowest single measurement of the defaults (drift, final)
};

}  // namespace

size_t SearchSpace::GridSize() const {
  std::set<std::string> keys;
  for (const Config& c : Product(defaults, grid)) {
    if (valid(c)) keys.insert(c.Key());
  }
  return keys.size();
}

SearchResult Search(const SearchSpace& space, const MeasureFn& measure, const SearchOptions& options) {
  return Searcher(space, measure, options).Run();
}

}  // namespace hone::tune
