// `hone bench MODELS... | --dir DIR`: speed and quality side by side, the
// Pareto frontier and a recommendation, written as table/Markdown/CSV/JSON/HTML.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "hw/probe.h"
#include "quant/bench.h"
#include "quant/files.h"
#include "quant/report.h"
#include "tune/spec_choice.h"
#include "util/format.h"
#include "util/progress.h"
#include "util/units.h"

namespace hone::cli {
namespace {
namespace fs = std::filesystem;

struct BenchArgs {
  quant::BenchOptions opt;
  std::string max_ram;
  double max_kld = -1;
  double min_pass_rate = -1;
  std::string results_dir = "hone-bench-results";
  bool no_tasks = false;
  bool no_cache = false;
  bool no_speed = false;
  bool json = false;
  std::string spec_prompts;  // a file, one prompt per line
  std::string flash_attn = "auto";
};

std::string MachineLine() {
  hw::ProbeOptions p;
  p.measure_bandwidth = false;
  auto m = hw::Probe(p);
  if (!m) return "unknown machine";
  return m->cpu_model + ", " + std::to_string(m->physical_cores) + " cores / " +
         std::to_string(m->logical_cpus) + " CPUs, " + FormatBytes(m->mem_total_bytes) + " RAM";
}

int Run(BenchArgs& a) {
  quant::Constraints c;
  if (!a.max_ram.empty()) {
    auto r = ParseSize(a.max_ram);
    if (!r) return Fail(r.error().ToString(), 2);
    c.max_ram = *r;
  }
  auto fa = engine::ParseFlashAttn(a.flash_attn);
  if (!fa) return Fail(fa.error().ToString(), 2);
  a.opt.flash_attn = *fa;
  c.max_kld = a.max_kld;
  c.min_pass_rate = a.min_pass_rate;
  if (a.no_tasks)
    a.opt.eval.clear();
  else if (a.opt.eval.empty() && fs::exists("evals/default.jsonl"))
    a.opt.eval = "evals/default.jsonl";
  if (!a.no_cache && a.opt.cache_dir.empty()) {
    const char* home = std::getenv("HOME");
    a.opt.cache_dir = std::string(home ? home : "/tmp") + "/.cache/hone/bench";
  }
  if (a.no_cache) a.opt.cache_dir.clear();
  if (!a.spec_prompts.empty()) {
    std::ifstream f(a.spec_prompts);
    if (!f) return Fail("cannot read " + a.spec_prompts, 2);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) a.opt.spec_prompts.push_back(line);
    if (a.opt.spec_prompts.empty()) return Fail(a.spec_prompts + " holds no prompt", 2);
  }
  if (!a.opt.draft.empty() && a.opt.spec.empty()) a.opt.spec = "draft-simple";
  if (!a.opt.spec.empty()) {
    if (auto m = tune::ParseSpecMode(a.opt.spec, !a.opt.draft.empty()); !m) return Fail(m.error().message, 2);
  }
  a.opt.speed = !a.no_speed;
  a.opt.quiet = a.json;
  if (a.json || !ProgressBar::StderrIsTerminal()) ProgressBar::SetEnabled(!a.json);

  auto r = quant::RunBench(a.opt);
  if (!r) return Fail(r.error().ToString(), r.error().code == ErrorCode::kInternal ? 1 : 2);
  r->machine = MachineLine();
  auto frontier = quant::ParetoFrontier(r->rows);
  auto rec = quant::Recommend(r->rows, c);

  std::error_code ec;
  fs::create_directories(a.results_dir, ec);
  if (ec) return Fail("cannot create " + a.results_dir + ": " + ec.message());
  const std::string base = (fs::path(a.results_dir) / "bench").string();
  const std::string md = "# hone bench\n\n" + r->machine + "\n\n" + quant::MarkdownReport(*r, frontier, rec);
  auto json = quant::JsonReport(*r, frontier, rec);
  for (auto [path, text] : {std::pair<std::string, std::string>{base + ".md", md},
                            {base + ".csv", quant::CsvReport(*r, frontier)},
                            {base + ".json", json.dump(2)},
                            {base + ".html", quant::HtmlReport(*r, frontier, rec)}}) {
    if (Status s = quant::WriteTextAtomic(path, text); !s.ok()) return Fail(s.error().ToString());
  }
  if (a.json) {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    std::printf("%s\n%s\n", r->machine.c_str(), quant::TerminalTable(*r, frontier).c_str());
    std::printf("Pareto frontier:");
    for (size_t i : frontier) std::printf(" %s", quant::RowLabel(r->rows[i]).c_str());
    std::printf("\nRecommendation: %s\n", rec.reason.c_str());
    std::printf("Reports: %s.{md,csv,json,html}\n", base.c_str());
  }
  bool any_ok = false;
  for (const auto& row : r->rows) any_ok |= row.ok;
  return any_ok ? 0 : 1;
}

Runner AddBenchCommand(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Measure speed and quality of GGUF models side by side and recommend one");
  cmd->add_option("models", a->opt.models, "GGUF files");
  cmd->add_option("--dir", a->opt.dir, "Every *.gguf in this folder");
  cmd->add_option("--ref", a->opt.ref,
                  "Reference model for KL divergence (default: the most bits per weight)");
  cmd->add_option("--corpus", a->opt.corpus, "Text for perplexity and KL divergence (omit to skip quality)");
  cmd->add_option("--eval", a->opt.eval, "Task suite JSONL (default: evals/default.jsonl when present)");
  cmd->add_flag("--no-tasks", a->no_tasks, "Skip the task checks");
  cmd->add_option("--ctx", a->opt.ctx, "Perplexity window (tokens)")->capture_default_str();
  cmd->add_option("--chunks", a->opt.chunks, "Most windows of the corpus to score (0 = all)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->opt.threads, "Threads (default: physical cores)");
  cmd->add_option("--prompt-tokens", a->opt.prompt_tokens, "Speed: prompt length")->capture_default_str();
  cmd->add_option("--gen-tokens", a->opt.gen_tokens, "Speed: tokens generated")->capture_default_str();
  cmd->add_option("--reps", a->opt.reps, "Speed: repetitions after a warm-up")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-speed", a->no_speed, "Skip the speed measurement");
  cmd->add_option("--spec", a->opt.spec,
                  "Speculative decoding per model: ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod or "
                  "draft-simple, against none");
  cmd->add_option("--draft", a->opt.draft, "Draft model for --spec draft-simple (same vocabulary)");
  cmd->add_option("--spec-prompts", a->spec_prompts, "--spec: prompts, one per line (default: hone tune's)");
  cmd->add_option("--flash-attn", a->flash_attn,
                  "auto (a tuned profile's choice, else off), on or off; on keeps --spec's greedy output "
                  "token-identical for drafts under 63 tokens (docs/serve.md)")
      ->capture_default_str();
  cmd->add_flag(
      "--no-profile", [a](int64_t) { a->opt.use_profile = false; }, "Ignore tuned profiles from hone tune");
  cmd->add_option("--max-ram", a->max_ram, "Recommendation: most memory (e.g. 2G)");
  cmd->add_option("--max-kld", a->max_kld, "Recommendation: highest mean KL divergence");
  cmd->add_option("--min-pass-rate", a->min_pass_rate, "Recommendation: lowest task pass rate (0..1)");
  cmd->add_option("--results", a->results_dir, "Folder for bench.{md,csv,json,html}")->capture_default_str();
  cmd->add_option("--cache-dir", a->opt.cache_dir, "Measurement cache (default ~/.cache/hone/bench)");
  cmd->add_flag("--no-cache", a->no_cache, "Measure everything again");
  cmd->add_flag("--json", a->json, "Print the JSON report");
  return [a]() { return Run(*a); };
}

const CommandRegistrar kRegistrar(80, &AddBenchCommand);

}  // namespace
}  // namespace hone::cli
