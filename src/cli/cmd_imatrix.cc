// `hone imatrix SRC.gguf --calib FILE [-o OUT]`: importance matrix in llama.cpp's
// GGUF imatrix format; `--check TYPE --corpus FILE` measures what it changes.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "quant/bench.h"
#include "quant/files.h"
#include "quant/imatrix_job.h"
#include "quant/quantize_job.h"
#include "util/progress.h"

namespace hone::cli {
namespace {
namespace fs = std::filesystem;

struct ImatrixArgs {
  std::string model, calib, out;
  quant::ImatrixOptions opt;
  std::string check_type, corpus;
  int ctx = 128, chunks = 0;
  bool json = false, quiet = false;
};

// Quantizes to `type` with and without the imatrix and compares both with
// the source on `corpus`: the effect of the imatrix, in KLD.
Result<nlohmann::json> CheckEffect(const ImatrixArgs& a) {
  const std::string dir = (fs::path(a.out).parent_path() / "imatrix-check").string();
  nlohmann::json out;
  quant::BenchOptions bo;
  bo.corpus = a.corpus;
  bo.ctx = a.ctx;
  bo.chunks = a.chunks;
  bo.threads = a.opt.threads;
  bo.speed = false;
  bo.ref = a.model;
  bo.quiet = a.quiet;
  for (bool with : {false, true}) {
    quant::QuantizeJobOptions qo;
    qo.types = {a.check_type};
    qo.out_dir = (fs::path(dir) / (with ? "with" : "without")).string();
    qo.imatrix = with ? a.out : "";
    qo.progress = !a.quiet;
    auto q = quant::QuantizeAll(a.model, qo);
    if (!q) return q.error();
    bo.models.push_back(q->front().path);
  }
  auto b = quant::RunBench(bo);
  if (!b) return b.error();
  for (const auto& r : b->rows) {
    if (r.is_ref) continue;
    if (!r.ok) return MakeError(ErrorCode::kInternal, r.path + ": " + r.error);
    bool with = r.path.find("/with/") != std::string::npos;
    out[with ? "with_imatrix" : "without_imatrix"] = {{"path", r.path},
                                                      {"ppl", r.ppl},
                                                      {"kld_mean", r.kld.mean},
                                                      {"kld_p99", r.kld.p99},
                                                      {"same_top1", r.kld.same_top1}};
  }
  return out;
}

int Run(ImatrixArgs& a) {
  if (a.out.empty()) {
    const fs::path dir = fs::path(a.model).parent_path();
    // A missing calibration file is the first thing to report; then a default
    // output that would land in a read-only folder.
    if (Status s = quant::CheckDefaultOutputDir(dir.string(), "-o"); !s && fs::exists(a.calib))
      return Fail(s.error().message, 2);
    a.out = (dir / (fs::path(a.model).stem().string() + ".imatrix.gguf")).string();
  }
  if (a.quiet || a.json) ProgressBar::SetEnabled(false);
  if (!a.check_type.empty() && a.corpus.empty()) return Fail("--check needs --corpus (held-out text)", 2);
  auto r = quant::ComputeImatrix(a.model, a.calib, a.out, a.opt);
  if (!r) return Fail(r.error().ToString(), r.error().code == ErrorCode::kInvalidArgument ? 2 : 1);
  nlohmann::json j = {{"model", a.model},     {"calib", a.calib},    {"out", a.out},
                      {"chunks", r->chunks},  {"tokens", r->tokens}, {"entries", r->entries},
                      {"seconds", r->seconds}};
  if (!a.json) {
    std::printf("wrote %s: %d tensors, %d chunks of %d tokens (%d tokens) in %.1f s\n", a.out.c_str(),
                r->entries, r->chunks, a.opt.n_ctx, r->tokens, r->seconds);
  }
  if (!a.check_type.empty()) {
    auto e = CheckEffect(a);
    if (!e) return Fail(e.error().ToString());
    j["check"] = *e;
    j["check"]["type"] = a.check_type;
    if (!a.json) {
      for (const char* k : {"without_imatrix", "with_imatrix"}) {
        const auto& v = (*e)[k];
        std::printf("%-8s %-16s PPL %.4f  mean KLD %.6f  p99 KLD %.5f  same top-1 %.2f%%\n",
                    a.check_type.c_str(), k, v["ppl"].get<double>(), v["kld_mean"].get<double>(),
                    v["kld_p99"].get<double>(), 100 * v["same_top1"].get<double>());
      }
    }
  }
  if (a.json) std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

Runner AddImatrixCommand(CLI::App& app) {
  auto a = std::make_shared<ImatrixArgs>();
  CLI::App* cmd =
      app.add_subcommand("imatrix", "Compute an importance matrix from calibration text (llama.cpp format)");
  cmd->add_option("model", a->model, "GGUF model (ideally F32/F16)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--calib", a->calib, "Calibration text")->required();
  cmd->add_option("-o,--out", a->out, "Output file (default: MODEL.imatrix.gguf beside the model)");
  cmd->add_option("-c,--ctx", a->opt.n_ctx, "Tokens per chunk")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--chunks", a->opt.max_chunks, "Most chunks (0 = whole text)")->capture_default_str();
  cmd->add_option("-t,--threads", a->opt.threads, "Threads (default: physical cores)");
  cmd->add_option("--check", a->check_type, "Also quantize to this type with and without it and compare KLD");
  cmd->add_option("--corpus", a->corpus, "Held-out text for --check");
  cmd->add_option("--check-ctx", a->ctx, "Window for --check")->capture_default_str();
  cmd->add_option("--check-chunks", a->chunks, "Most windows of --corpus for --check (0 = all)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bars");
  return [a]() { return Run(*a); };
}

const CommandRegistrar kRegistrar(70, &AddImatrixCommand);

}  // namespace
}  // namespace hone::cli
