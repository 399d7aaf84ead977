// `hone tune MODEL`: measures which llama.cpp run parameters are fastest for
// this machine, this model and this workload, then saves a profile that
// `hone run` picks up and prints the equivalent llama.cpp flags.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "engine/amx.h"
#include "engine/backend.h"
#include "hw/probe.h"
#include "tune/flags.h"
#include "tune/measure.h"
#include "tune/plan.h"
#include "tune/profile.h"
#include "tune/report.h"
#include "tune/search_space.h"
#include "tune/spec_choice.h"
#include "util/format.h"

namespace hone::cli {
namespace {

struct TuneArgs : tune::TuneRequest {
  std::string spec = "auto";  // auto: measure speculation too; none: skip it; only: just speculation
  std::string draft;
  std::string spec_prompts;  // a file, one prompt per line
  bool json = false;
  bool quiet = false;
  bool no_save = false;
  bool no_isolate = false;
};

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void PrintProgress(const tune::Trial& t, double fraction) {
  std::string what = t.error.empty() ? "" : "  failed: " + t.error;
  std::fprintf(stderr, "[tune %3.0f%%] #%-3d %-13s %s  %.2f ± %.2f (n=%zu)%s\n",
               std::min(fraction, 1.0) * 100, t.id, t.stage.c_str(), t.config.Key().c_str(), t.score.mean,
               t.score.ci95, t.samples.size(), what.c_str());
}

// "verified", "NOT applied" (some llama.cpp builds ignore placement) or "" when not pinned.
std::string PlacementCheck(const tune::Trial& t) {
  int best = -1;
  for (const tune::Sample& s : t.samples) best = std::max(best, s.affinity);
  return best < 0 ? "" : best > 0 ? "verified" : "NOT applied";
}

nlohmann::json TrialJson(const tune::Trial& t) {
  return {{"id", t.id},
          {"stage", t.stage},
          {"config", t.config.Key()},
          {"reps", t.samples.size()},
          {"score", t.score.mean},
          {"ci95", t.score.ci95},
          {"cv", t.score.cv()},
          {"ttft_ms", t.mean(&tune::Sample::ttft_s) * 1000},
          {"prefill_tps", t.mean(&tune::Sample::prefill_tps)},
          {"decode_tps", t.mean(&tune::Sample::decode_tps)},
          {"quality", t.samples.empty() ? 0.0 : t.mean(&tune::Sample::quality)},
          {"placement_verified", PlacementCheck(t)},
          {"seconds", t.seconds},
          {"dropped", t.dropped},
          {"error", t.error}};
}

const tune::Trial* FinalTrial(const tune::SearchResult& r, const tune::Config& c) {
  const tune::Trial* found = nullptr;
  for (const tune::Trial& t : r.trials) {
    if (t.config == c && t.error.empty() && !t.samples.empty()) found = &t;  // the last: the final comparison
  }
  return found;
}

struct Outcome {
  tune::Profile profile;
  tune::Roofline roofline;
  const tune::Trial* best = nullptr;
  const tune::Trial* defaults = nullptr;
  size_t grid_size = 0;
  std::string saved_to;
  std::optional<tune::SpecTuneResult> spec;
};

// The speculation table, the cost curve and what it projects.
void PrintSpec(const tune::SpecTuneResult& s) {
  std::printf("\nspeculation    greedy decode on the prompts, paired with none (95%% CI)\n");
  for (const tune::SpecOption& o : s.options) {
    std::printf("  %-26s %8.1f tok/s  x%.3f ± %.3f", o.Key().c_str(), o.tps.mean, o.speedup.mean,
                o.speedup.ci95);
    if (o.mode != "none") std::printf("  drafts kept %.0f%% of %d", o.acceptance * 100, o.drafted);
    std::printf("\n");
  }
  if (s.confirmed.mode != "none")
    std::printf("confirmed      %s x%.3f ± %.3f in fresh rounds against none alone%s\n",
                s.confirmed.Key().c_str(), s.confirmed.speedup.mean, s.confirmed.speedup.ci95,
                s.choice.mode == "none" ? ": not beyond its CI, so none" : "");
  std::printf("cost curve     t(k+1)/t(1):");
  for (size_t i = 0; i < s.cost_k.size(); ++i) std::printf(" k=%d %.2f", s.cost_k[i], s.cost_curve[i]);
  std::printf("\nprojected      speedup at draft length k for acceptance a (from the curve):");
  for (double a : {0.5, 0.7, 0.9}) {
    double best = 0;
    int best_k = 0;
    for (size_t i = 1; i < s.cost_k.size(); ++i) {
      const double x = tune::ProjectedSpeedup(a, s.cost_k[i], s.cost_curve[i]);
      if (x > best) best = x, best_k = s.cost_k[i];
    }
    std::printf(" a=%.1f x%.2f (k=%d)", a, best, best_k);
  }
  std::printf("\nchosen         %s\n",
              s.choice.mode == "none" ? "none (no option was faster beyond its CI)" : s.choice.mode.c_str());
}

nlohmann::json SpecJson(const tune::SpecTuneResult& s) {
  nlohmann::json opts = nlohmann::json::array();
  for (const tune::SpecOption& o : s.options)
    opts.push_back({{"option", o.Key()},
                    {"mode", o.mode},
                    {"ngram", o.ngram},
                    {"max_draft", o.max_draft},
                    {"tps", o.tps.mean},
                    {"tps_ci95", o.tps.ci95},
                    {"speedup", o.speedup.mean},
                    {"speedup_ci95", o.speedup.ci95},
                    {"drafted", o.drafted},
                    {"acceptance", o.acceptance}});
  nlohmann::json confirmed = nullptr;
  if (s.confirmed.mode != "none")
    confirmed = {{"option", s.confirmed.Key()},
                 {"speedup", s.confirmed.speedup.mean},
                 {"speedup_ci95", s.confirmed.speedup.ci95},
                 {"acceptance", s.confirmed.acceptance}};
  return {{"options", opts},         {"confirmed", confirmed},
          {"cost_k", s.cost_k},      {"cost_curve", s.cost_curve},
          {"chosen", s.choice.mode}, {"llama_server_flags", tune::LlamaServerSpecFlags(s.choice)}};
}

void PrintText(const TuneArgs& a, const tune::Plan& p, const tune::SearchResult& r, const Outcome& o) {
  std::printf("%s\n", tune::TrialTable(r).c_str());
  std::printf("objective      %s\n", tune::ObjectiveDescription(p.spec.workload).c_str());
  std::printf("defaults       %s\n", r.trials[0].config.Key().c_str());
  std::printf("tuned          %s%s\n", r.best.Key().c_str(), r.kept_defaults ? "  (kept the defaults)" : "");
  auto line = [](const char* name, const tune::Trial* t) {
    if (!t) return;
    std::printf("%-14s score %.2f ± %.2f | TTFT %.1f ms | prefill %.1f tok/s | decode %.2f tok/s\n", name,
                t->score.mean, t->score.ci95, t->mean(&tune::Sample::ttft_s) * 1000,
                t->mean(&tune::Sample::prefill_tps), t->mean(&tune::Sample::decode_tps));
  };
  line("  default", o.defaults);
  line("  tuned", o.best);
  std::printf("speedup        %.3f ± %.3f (95%% CI, %d paired repetitions)\n", r.speedup.mean, r.speedup.ci95,
              r.speedup.n);
  std::printf(
      "roofline       decode %.2f tok/s = %.1f%% of %.1f tok/s (%s per token at %.1f GB/s measured)\n",
      o.best ? o.best->mean(&tune::Sample::decode_tps) : 0.0, o.roofline.fraction * 100, o.roofline.max_tps,
      FormatBytes(o.roofline.bytes_per_token).c_str(), o.roofline.bandwidth_gbps);
  std::printf("measuring      %.1f s in %zu trials (%s search; full grid has %zu configurations)%s\n",
              r.measure_seconds, r.trials.size(), a.exhaustive ? "exhaustive" : "default", o.grid_size,
              r.budget_exhausted ? ", budget reached" : "");
  if (r.max_drift > 0)
    std::printf("drift          defaults moved by up to %.1f%% during the tune\n", r.max_drift * 100);
  for (const std::string& n : r.notes) std::printf("note           %s\n", n.c_str());
  for (const tune::Trial& t : r.trials) {
    if (PlacementCheck(t) == "NOT applied") {
      std::printf(
          "warning        trial #%d asked for CPU pinning but /proc/self/task shows it did not take effect\n",
          t.id);
    }
  }
  if (o.spec) PrintSpec(*o.spec);
  std::printf("llama-server   %s\n", o.profile.llama_server_flags.c_str());
  std::printf("llama-cli      %s\n", o.profile.llama_cli_flags.c_str());
  if (!o.saved_to.empty())
    std::printf("profile        %s (hone run loads it automatically)\n", o.saved_to.c_str());
}

void PrintJson(const TuneArgs& a, const tune::Plan& p, const tune::SearchResult& r, const Outcome& o) {
  nlohmann::json trials = nlohmann::json::array();
  for (const tune::Trial& t : r.trials) trials.push_back(TrialJson(t));
  nlohmann::json j = {{"model", a.model},
                      {"workload", tune::WorkloadName(p.spec.workload)},
                      {"objective", tune::ObjectiveDescription(p.spec.workload)},
                      {"exhaustive", a.exhaustive},
                      {"budget_seconds", p.budget_s},
                      {"measure_seconds", r.measure_seconds},
                      {"budget_exhausted", r.budget_exhausted},
                      {"grid_size", o.grid_size},
                      {"default", r.trials[0].config.Key()},
                      {"best", r.best.Key()},
                      {"best_params", tune::ConfigJson(r.best)},
                      {"default_params", tune::ConfigJson(r.trials[0].config)},
                      {"kept_defaults", r.kept_defaults},
                      {"default_score", r.default_score.mean},
                      {"best_score", r.best_score.mean},
                      {"speedup", r.speedup.mean},
                      {"speedup_ci95", r.speedup.ci95},
                      {"best_ttft_ms", o.best ? o.best->mean(&tune::Sample::ttft_s) * 1000 : 0},
                      {"best_decode_tps", o.best ? o.best->mean(&tune::Sample::decode_tps) : 0},
                      {"roofline",
                       {{"bytes_per_token", o.roofline.bytes_per_token},
                        {"bandwidth_gbps", o.roofline.bandwidth_gbps},
                        {"max_decode_tps", o.roofline.max_tps},
                        {"fraction", o.roofline.fraction}}},
                      {"max_drift", r.max_drift},
                      {"notes", r.notes},
                      {"llama_server_flags", o.profile.llama_server_flags},
                      {"llama_cli_flags", o.profile.llama_cli_flags},
                      {"profile", o.saved_to},
                      {"fingerprint", o.profile.fingerprint},
                      {"model_hash", o.profile.model_hash},
                      {"trials", trials}};
  if (o.spec) j["speculation"] = SpecJson(*o.spec);
  std::printf("%s\n", j.dump(2).c_str());
}

tune::Profile MakeProfile(const TuneArgs& a, const tune::Plan& p, const tune::SearchResult& r,
                          const std::string& hash) {
  tune::Profile pr;
  pr.fingerprint = hw::Fingerprint(p.machine);
  pr.model_hash = hash;
  pr.model_path = a.model;
  pr.workload = tune::WorkloadName(p.spec.workload);
  pr.created = UtcNow();
  pr.prompt_tokens = p.spec.prompt_tokens;
  pr.gen_tokens = p.spec.gen_tokens;
  pr.concurrency = p.spec.concurrency;
  pr.config = r.best;
  pr.objective = tune::ObjectiveDescription(p.spec.workload);
  pr.best_score = r.best_score.mean;
  pr.default_score = r.default_score.mean;
  pr.speedup = r.speedup.mean;
  pr.speedup_ci95 = r.speedup.ci95;
  pr.llama_server_flags = tune::LlamaFlags(r.best, tune::LlamaTool::kServer, static_cast<int>(p.spec.n_ctx));
  pr.llama_cli_flags = tune::LlamaFlags(r.best, tune::LlamaTool::kCli);
  return pr;
}

Result<tune::SpecTuneResult> MeasureSpeculation(const TuneArgs& a, const tune::Plan& p,
                                                const tune::Config& best) {
  tune::SpecTuneRequest req;
  req.draft = a.draft;
  req.gen_tokens = std::max(16, p.spec.gen_tokens);
  if (!a.spec_prompts.empty()) {
    std::ifstream f(a.spec_prompts);
    if (!f) return MakeError(ErrorCode::kNotFound, "cannot read " + a.spec_prompts);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) req.prompts.push_back(line);
    if (req.prompts.empty())
      return MakeError(ErrorCode::kInvalidArgument, a.spec_prompts + " holds no prompt");
  }
  if (!a.quiet) std::fprintf(stderr, "[hone] measuring speculative decoding with the tuned parameters\n");
  return tune::TuneSpeculation(a.model, best, req, [&](int done, int total, const std::string& what) {
    if (!a.quiet)
      std::fprintf(stderr, "[tune %3.0f%%] %s %d/%d\n", 100.0 * done / total, what.c_str(), done, total);
  });
}

// --spec only: the run parameters of this machine's saved profile (else the
// defaults) stay as they are; only the speculation stage is measured, and the
// profile's [speculation] and llama-server flags are rewritten. For adding a
// draft model, or new prompts, without tuning everything again.
int TuneSpeculationOnly(const TuneArgs& a, const tune::Plan& p, const tune::Config& defaults) {
  auto found = tune::FindProfile(a.model);
  if (!found) return Fail(found.error().ToString());
  const tune::Config config = *found ? (*found)->config : defaults;
  auto spec = MeasureSpeculation(a, p, config);
  if (!spec) return Fail("speculation: " + spec.error().ToString());
  std::string saved_to;
  if (*found && !a.no_save) {
    tune::Profile profile = **found;
    profile.spec = spec->choice;
    profile.llama_server_flags =
        tune::LlamaFlags(config, tune::LlamaTool::kServer, static_cast<int>(p.spec.n_ctx));
    const std::string flags = tune::LlamaServerSpecFlags(spec->choice);
    if (!flags.empty()) profile.llama_server_flags += " " + flags;
    if (Status s = tune::SaveProfile(profile, profile.path); !s) return Fail(s.error().ToString());
    saved_to = profile.path;
  }
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"params", tune::ConfigJson(config)},
                        {"params_from", *found ? "profile" : "defaults"},
                        {"speculation", SpecJson(*spec)},
                        {"profile", saved_to.empty() ? nlohmann::json(nullptr) : nlohmann::json(saved_to)}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("params         %s (%s)\n", config.Key().c_str(),
              *found ? "from the saved profile" : "the defaults: no profile saved for this model here");
  PrintSpec(*spec);
  if (!saved_to.empty()) std::printf("\nsaved          %s\n", saved_to.c_str());
  return 0;
}

int Tune(const TuneArgs& a) {
  auto planned = tune::MakePlan(a, [&](const std::string& line) {
    if (!a.quiet) std::fprintf(stderr, "[hone] %s\n", line.c_str());
  });
  if (!planned) {
    const Error& e = planned.error();
    return e.code == ErrorCode::kInvalidArgument ? Fail(e.message, 2) : Fail(e.ToString());
  }
  tune::Plan& p = *planned;
  auto hash = tune::ModelHash(a.model);
  if (!hash) return Fail(hash.error().ToString());
  if (!a.draft.empty() && a.spec != "none") {
    if (Status st = tune::CheckDraft(a.model, a.draft); !st)
      return st.error().code == ErrorCode::kInvalidArgument ? Fail(st.error().message, 2)
                                                            : Fail(st.error().ToString());
  }

  const tune::SpaceRequest sr = tune::SpaceRequestFor(p);
  tune::SearchSpace space = tune::BuildSearchSpace(p.machine, sr);
  if (a.spec == "only") return TuneSpeculationOnly(a, p, space.defaults);
  Outcome o;
  o.grid_size = space.GridSize();
  if (!a.quiet) {
    std::fprintf(stderr, "[hone] tuning %s for %s on %s: %zu grid configurations, %s budget %.0f s\n",
                 a.model.c_str(), tune::WorkloadName(p.spec.workload), p.machine.cpu_model.c_str(),
                 o.grid_size, a.exhaustive ? "no" : "a", p.budget_s);
  }
  if (!a.no_isolate) p.spec.isolate_with = "/proc/self/exe";
  tune::Measurer measurer(a.model, p.spec);
  tune::SearchOptions so;
  so.budget_s = p.budget_s;
  so.exhaustive = a.exhaustive;
  if (!a.quiet) so.on_trial = &PrintProgress;
  tune::MeasureFn fn = [&](const tune::Config& c, int reps) { return measurer.Measure(c, reps); };
  tune::SearchResult r = tune::Search(space, fn, so);
  if (measurer.isolated_children() > 0)
    r.notes.push_back("each kernel path (layout, attention, KV type) ran once in a child process first: " +
                      std::to_string(measurer.isolated_children()) + " child runs");
  if (engine::Amx().cpu) r.notes.push_back("AMX: " + engine::Amx().reason);
  if (!sr.poll_applies)
    r.notes.push_back(
        "poll level not searched: this llama.cpp build runs ggml on OpenMP threads, which ignore it");
  if (r.trials.empty() || !r.trials[0].error.empty()) {
    return Fail("the defaults could not be measured: " + (r.trials.empty() ? "" : r.trials[0].error));
  }

  o.best = FinalTrial(r, r.best);
  o.defaults = FinalTrial(r, space.defaults);
  const int avg_ctx = p.spec.prompt_tokens + p.spec.gen_tokens / 2;
  o.roofline = tune::DecodeRoofline(tune::DecodeBytesPerToken(p.gguf, avg_ctx, r.best.kv_type),
                                    p.machine.bandwidth.read_gbps,
                                    o.best ? o.best->mean(&tune::Sample::decode_tps) : 0);
  o.profile = MakeProfile(a, p, r, *hash);
  if (a.spec != "none") {
    auto spec = MeasureSpeculation(a, p, r.best);
    if (!spec) return Fail("speculation: " + spec.error().ToString());
    o.profile.spec = spec->choice;
    const std::string flags = tune::LlamaServerSpecFlags(spec->choice);
    if (!flags.empty()) o.profile.llama_server_flags += " " + flags;
    o.spec = std::move(*spec);
  }
  if (!a.no_save) {
    std::string path = tune::ProfilePath(o.profile.fingerprint, o.profile.model_hash);
    if (Status s = tune::SaveProfile(o.profile, path); !s) return Fail(s.error().ToString());
    o.saved_to = path;
  }
  if (a.json)
    PrintJson(a, p, r, o);
  else
    PrintText(a, p, r, o);
  return 0;
}

Runner AddTuneCommand(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd =
      app.add_subcommand("tune", "Measure which llama.cpp run parameters are fastest here; save a profile");
  cmd->add_option("model", a->model, "GGUF model file")->required();
  cmd->add_option("--workload", a->workload, "chat, batch or server")->capture_default_str();
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "Prompt length of each request")
      ->capture_default_str();
  cmd->add_option("--gen-tokens", a->gen_tokens, "Tokens generated per request")->capture_default_str();
  cmd->add_option("-c,--ctx", a->ctx, "Context size (0 = just enough for the workload)")
      ->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency, "Sequences at once (batch and server)")
      ->capture_default_str();
  cmd->add_option("--min-stream-tps", a->min_stream_tps, "Server: slowest acceptable per-stream decode tok/s")
      ->capture_default_str();
  cmd->add_option("--budget", a->budget, "Time budget for measuring, e.g. 90s, 5m")->capture_default_str();
  cmd->add_flag("--exhaustive", a->exhaustive, "Measure the whole grid (ignores --budget; the reference)");
  cmd->add_flag("--json", a->json, "Print one JSON object with every trial and the result");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress lines");
  cmd->add_flag("--no-save", a->no_save, "Do not write the profile");
  cmd->add_option("--spec", a->spec,
                  "auto: also measure speculative decoding and keep what pays; none: skip it; only: "
                  "keep the saved profile's run parameters and measure just speculation")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "only"}));
  cmd->add_option("--draft", a->draft, "A draft model to measure among the speculation options")
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--spec-prompts", a->spec_prompts,
         "File of prompts (one per line) for the speculation stage; default: built-in support replies "
         "and a story")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--no-isolate", a->no_isolate,
      "Measure every configuration in-process without first running its kernels in a child process");
  return [a]() { return Tune(*a); };
}

const CommandRegistrar kRegistrar(50, &AddTuneCommand);

}  // namespace
}  // namespace hone::cli
