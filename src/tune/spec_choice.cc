#include "tune/spec_choice.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>

#include "engine/batch_decoder.h"
#include "engine/drafter.h"
#include "engine/generator.h"
#include "engine/tokenizer.h"

namespace hone::tune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCostKs[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
constexpr int kCostReps = 7;

// Seconds of one decode of n tokens for sequence 0 after `context`.
Result<double> TimeStep(engine::Session& s, const std::vector<engine::Token>& context, int n) {
  engine::BatchDecoder batch(s, n);
  for (int i = 0; i < n; ++i)
    batch.Add(0, context[static_cast<size_t>(i) % context.size()], static_cast<int>(context.size()) + i,
              true);
  const auto t0 = Clock::now();
  if (Status st = batch.Decode(); !st) return st.error();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  s.TruncateSequence(0, static_cast<int>(context.size()));
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The repetitions go round-robin over every batch size rather than one size
// after another: a burst of load from another process (a CI run loaded the
// two cores for a few seconds) then slows every size alike instead of
// inflating t(1) alone, which once gave t(4)/t(1) = 0.003.
Status MeasureCostCurve(engine::Session& s, const std::vector<engine::Token>& context, SpecTuneResult* out) {
  s.ClearSequence(0);
  if (Status st = engine::Prefill(s, 0, context, 0); !st) return st;
  std::vector<std::vector<double>> times(std::size(kCostKs));
  for (int rep = 0; rep < kCostReps; ++rep) {
    for (size_t i = 0; i < std::size(kCostKs); ++i) {
      auto t = TimeStep(s, context, kCostKs[i] + 1);
      if (!t) return t.error();
      times[i].push_back(*t);
    }
  }
  const double one = Median(times[0]);
  for (size_t i = 0; i < std::size(kCostKs); ++i) {
    out->cost_k.push_back(kCostKs[i]);
    out->cost_curve.push_back(i == 0 ? 1.0 : Median(times[i]) / one);
  }
  s.ClearSequence(0);
  return Status::Ok();
}

SpecOption Option(const char* mode, int ngram, int max_draft = 64) {
  SpecOption o;
  o.mode = mode;
  o.ngram = ngram;
  o.max_draft = max_draft;
  return o;
}

std::vector<SpecOption> Options(bool has_draft) {
  std::vector<SpecOption> o = {Option("none", 0)};
  for (int n : {3, 0}) o.push_back(Option("ngram-simple", n));
  for (const char* m : {"ngram-map-k", "ngram-map-k4v", "ngram-mod"}) o.push_back(Option(m, 0));
  if (has_draft)
    for (int k : {4, 16}) o.push_back(Option("draft-simple", 0, k));
  return o;
}

Result<std::unique_ptr<engine::Drafter>> DrafterFor(const SpecOption& o, engine::Session& target,
                                                    const std::shared_ptr<engine::Model>& draft) {
  engine::DrafterOptions d;
  d.mode = o.mode;
  d.ngram = o.ngram;
  d.max_draft = o.max_draft;
  d.target = &target;
  if (o.mode == "draft-simple") {
    engine::SessionOptions so = target.options();
    so.kv_type_k = so.kv_type_v = "f16";
    auto s = engine::Session::Create(draft, so);
    if (!s) return s.error();
    d.draft_session = std::move(*s);
  }
  return engine::Drafter::Create(std::move(d));
}

// One greedy generation: tokens per second, drafted and kept.
struct Run {
  double tps = 0;
  int drafted = 0, kept = 0;
  std::vector<engine::Token> tokens;
};
Result<Run> Generate(engine::Session& s, const std::vector<engine::Token>& prompt, int n,
                     engine::Drafter* d) {
  engine::GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.drafter = d;
  r.spec_max = d ? 64 : 1;
  auto g = engine::Generate(s, r);
  if (!g) return g.error();
  return Run{g->gen_tps(), g->draft_tokens, g->accepted_tokens, std::move(g->tokens)};
}

// Paired rounds of greedy generation: every prompt once per option in
// rotating order (no option always runs first, on warm caches or turbo),
// each option's speedup the ratio to none's run in the same round.
struct Rounds {
  engine::Session& session;
  const std::vector<std::vector<engine::Token>>& prompts;
  const std::vector<std::unique_ptr<engine::Drafter>>& drafters;
  const SpecTuneRequest& req;
  const std::function<void(int, int, const std::string&)>& progress;
  int total;  // progress steps: the first pass and a confirmation
  int done = 0;

  // `which` indexes `drafters` (0: none, first); results go to (*opts)[j].
  Status Measure(const std::vector<size_t>& which, std::vector<SpecOption>* opts) {
    std::vector<std::vector<double>> tps(which.size()), ratio(which.size());
    std::vector<int> drafted(which.size()), kept(which.size());
    for (int rep = 0; rep < req.reps; ++rep) {
      for (const auto& prompt : prompts) {
        std::vector<double> round(which.size());
        for (size_t n = 0; n < which.size(); ++n) {
          const size_t j = (n + static_cast<size_t>(done)) % which.size();
          auto r = Generate(session, prompt, req.gen_tokens, drafters[which[j]].get());
          if (!r) return MakeError(r.error().code, (*opts)[j].Key() + ": " + r.error().message);
          round[j] = r->tps;
          drafted[j] += r->drafted, kept[j] += r->kept;
        }
        for (size_t j = 0; j < which.size(); ++j) {
          tps[j].push_back(round[j]);
          if (round[0] > 0) ratio[j].push_back(round[j] / round[0]);
        }
        if (progress) progress(std::min(++done, total), total, "speculation");
      }
    }
    for (size_t j = 0; j < which.size(); ++j) {
      SpecOption& o = (*opts)[j];
      o.tps = Summarize(tps[j]);
      o.speedup = Summarize(ratio[j]);
      o.drafted = drafted[j];
      o.acceptance = drafted[j] > 0 ? static_cast<double>(kept[j]) / drafted[j] : 0;
    }
    return Status::Ok();
  }
};

// The fastest option whose speedup's 95% CI lies above 1; 0 (none) if none does.
size_t BestPaying(const std::vector<SpecOption>& opts) {
  size_t best = 0;
  for (size_t i = 1; i < opts.size(); ++i) {
    const SpecOption& o = opts[i];
    const bool pays = o.speedup.mean - o.speedup.ci95 > 1.0;
    if (pays && o.speedup.mean > (best ? opts[best].speedup.mean : 1.0)) best = i;
  }
  return best;
}

// The request's prompts (else the default ones) in the target's tokens.
Result<std::vector<std::vector<engine::Token>>> TokenizePrompts(engine::Session& session,
                                                                const SpecTuneRequest& req) {
  engine::Tokenizer tok(session.model());
  std::vector<std::vector<engine::Token>> prompts;
  for (const std::string& p : req.prompts.empty() ? DefaultSpecPrompts() : req.prompts) {
    auto t = tok.Encode(p, true, false);
    if (!t) return t.error();
    prompts.push_back(*t);
  }
  return prompts;
}

}  // namespace

std::string SpecOption::Key() const {
  std::string k = mode;
  if (ngram > 0) k += " n=" + std::to_string(ngram);
  if (mode == "draft-simple") k += " max=" + std::to_string(max_draft);
  return k;
}

std::vector<std::string> DefaultSpecPrompts() {
  return {
      "Customer: My order 48213-A to 12 Harbor Street, Springfield has not arrived. Order 48213-A was due on "
      "Monday.\nAgent: I am sorry to hear that. Your order 48213-A to 12 Harbor Street, Springfield",
      "顾客：我的订单 48213-A 寄到春田市港口街12号，还没有到。订单 48213-A "
      "应该周一到。\n客服：非常抱歉。您的订单 48213-A "
      "寄到春田市港口街12号",
      "Once upon a time, there was a little girl named Lily. Lily had a big red ball. Lily liked to play "
      "with her "
      "big red ball. One day, Lily",
  };
}

double ProjectedSpeedup(double a, int k, double cost) {
  if (cost <= 0) return 0;
  const double tokens = a >= 1 ? k + 1 : (1 - std::pow(a, k + 1)) / (1 - a);
  return tokens / cost;
}

Result<SpecTuneResult> TuneSpeculation(engine::Session& session, const engine::LoadOptions& load,
                                       const SpecTuneRequest& req,
                                       const std::function<void(int, int, const std::string&)>& progress) {
  SpecTuneResult out;
  auto prompts = TokenizePrompts(session, req);
  if (!prompts) return prompts.error();
  if (Status st = MeasureCostCurve(session, (*prompts)[0], &out); !st) return st.error();
  std::shared_ptr<engine::Model> draft;
  if (!req.draft.empty()) {
    auto m = engine::Model::Load(req.draft, load);
    if (!m) return MakeError(m.error().code, "the draft model: " + m.error().message);
    draft = *m;
  }
  out.options = Options(draft != nullptr);
  std::vector<std::unique_ptr<engine::Drafter>> drafters(out.options.size());
  for (size_t i = 1; i < out.options.size(); ++i) {
    auto d = DrafterFor(out.options[i], session, draft);
    if (!d) return MakeError(d.error().code, out.options[i].Key() + ": " + d.error().message);
    drafters[i] = std::move(*d);
  }
  Rounds rounds{session, *prompts, drafters, req, progress, req.reps * static_cast<int>(prompts->size()) * 2};
  std::vector<size_t> all(out.options.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  if (Status st = rounds.Measure(all, &out.options); !st) return st.error();
  size_t best = BestPaying(out.options);
  if (best != 0) {
    // Seven options against one baseline: the best of seven noisy ratios
    // overstates (the winner's curse). It must pay again in fresh rounds.
    std::vector<SpecOption> confirm = {out.options[0], out.options[best]};
    if (Status st = rounds.Measure({0, best}, &confirm); !st) return st.error();
    out.confirmed = confirm[1];
    if (BestPaying(confirm) == 0) best = 0;
  }
  SpecChoice& c = out.choice;
  const SpecOption& chosen = best ? out.confirmed : out.options[0];
  c.measured = true;
  c.mode = chosen.mode;
  c.ngram = chosen.ngram;
  c.max_draft = chosen.max_draft;
  c.draft = c.mode == "draft-simple" ? req.draft : "";
  c.speedup = chosen.speedup.mean;
  c.acceptance = chosen.acceptance;
  c.cost_curve = out.cost_curve;
  return out;
}

Result<SpecOption> ParseSpecMode(const std::string& mode, bool has_draft) {
  for (const SpecOption& o : Options(true)) {
    if (o.mode != mode || o.mode == "none") continue;
    if (mode == "draft-simple" && !has_draft)
      return MakeError(ErrorCode::kInvalidArgument, "--spec draft-simple needs --draft MODEL");
    return Option(o.mode.c_str(), 0);  // llama.cpp's defaults: its n-gram size, 16 drafts at most
  }
  return MakeError(ErrorCode::kInvalidArgument, "--spec " + mode +
                                                    ": expected ngram-simple, ngram-map-k, ngram-map-k4v, "
                                                    "ngram-mod or draft-simple");
}

Result<SpecBenchResult> MeasureSpecOption(engine::Session& session, const engine::LoadOptions& load,
                                          const SpecTuneRequest& req, const SpecOption& option) {
  auto prompts = TokenizePrompts(session, req);
  if (!prompts) return prompts.error();
  std::shared_ptr<engine::Model> draft;
  if (option.mode == "draft-simple") {
    auto m = engine::Model::Load(req.draft, load);
    if (!m) return MakeError(m.error().code, "the draft model: " + m.error().message);
    draft = *m;
  }
  auto drafter = DrafterFor(option, session, draft);
  if (!drafter) return MakeError(drafter.error().code, option.Key() + ": " + drafter.error().message);
  SpecBenchResult out;
  out.option = option;
  std::vector<double> none_tps, tps, ratio;
  int drafted = 0, kept = 0;
  for (int rep = 0; rep < req.reps; ++rep) {
    for (const auto& prompt : *prompts) {
      // Alternating which goes first: neither always runs on warmer caches.
      const bool spec_first = (out.generations % 2) == 1;
      Result<Run> a = Generate(session, prompt, req.gen_tokens, spec_first ? drafter->get() : nullptr);
      if (!a) return a.error();
      Result<Run> b = Generate(session, prompt, req.gen_tokens, spec_first ? nullptr : drafter->get());
      if (!b) return b.error();
      const Run& plain = spec_first ? *b : *a;
      const Run& spec = spec_first ? *a : *b;
      none_tps.push_back(plain.tps);
      tps.push_back(spec.tps);
      if (plain.tps > 0) ratio.push_back(spec.tps / plain.tps);
      drafted += spec.drafted, kept += spec.kept;
      ++out.generations;
      out.differing += spec.tokens != plain.tokens;
    }
  }
  out.none_tps = Summarize(none_tps);
  out.option.tps = Summarize(tps);
  out.option.speedup = Summarize(ratio);
  out.option.drafted = drafted;
  out.option.acceptance = drafted > 0 ? static_cast<double>(kept) / drafted : 0;
  return out;
}

Result<SpecTuneResult> TuneSpeculation(const std::string& model_path, const Config& best,
                                       const SpecTuneRequest& req,
                                       const std::function<void(int, int, const std::string&)>& progress) {
  const engine::LoadOptions load = best.ToLoadOptions();
  auto model = engine::Model::Load(model_path, load);
  if (!model) return model.error();
  // Room for the longest prompt, the answer, and drafts past it.
  size_t longest = 0;
  engine::Tokenizer tok(**model);
  for (const std::string& p : req.prompts.empty() ? DefaultSpecPrompts() : req.prompts)
    if (auto t = tok.Encode(p, true, false)) longest = std::max(longest, t->size());
  engine::SessionOptions so = best.ToSessionOptions(
      static_cast<uint32_t>((longest + static_cast<size_t>(req.gen_tokens) + 64 + 255) / 256 * 256));
  so.n_seq_max = 1;
  so.n_batch = std::max<uint32_t>(so.n_batch, 32);
  auto session = engine::Session::Create(*model, so);
  if (!session) return session.error();
  return TuneSpeculation(**session, load, req, progress);
}

Status CheckDraft(const std::string& model_path, const std::string& draft_path) {
  engine::LoadOptions lazy;  // mmap: only the vocabulary is read
  auto target = engine::Model::Load(model_path, lazy);
  if (!target) return target.error();
  auto draft = engine::Model::Load(draft_path, lazy);
  if (!draft) return MakeError(draft.error().code, "the draft model: " + draft.error().message);
  if (std::string why = engine::VocabularyMismatch(**target, **draft); !why.empty())
    return MakeError(ErrorCode::kInvalidArgument,
                     "the draft model " + draft_path + " cannot draft for this model: " + why);
  return Status::Ok();
}

std::string LlamaServerSpecFlags(const SpecChoice& c) {
  if (c.mode == "none") return "";
  std::string f = "--spec-type " + c.mode;
  if (c.ngram > 0) {
    if (c.mode == "ngram-simple") f += " --spec-ngram-simple-size-n " + std::to_string(c.ngram);
    if (c.mode == "ngram-map-k") f += " --spec-ngram-map-k-size-n " + std::to_string(c.ngram);
    if (c.mode == "ngram-map-k4v") f += " --spec-ngram-map-k4v-size-n " + std::to_string(c.ngram);
    if (c.mode == "ngram-mod") f += " --spec-ngram-mod-n-match " + std::to_string(c.ngram);
  }
  if (c.mode == "draft-simple") f += " -md " + c.draft + " --spec-draft-n-max " + std::to_string(c.max_draft);
  return f;
}

}  // namespace hone::tune
