// `hone quantize SRC.gguf --types q8_0,q4_k_m,... [--imatrix FILE] [--out-dir DIR]`
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "quant/quantize_job.h"
#include "util/format.h"
#include "util/progress.h"

namespace hone::cli {
namespace {

struct QuantizeArgs {
  std::string src;
  std::vector<std::string> types;
  quant::QuantizeJobOptions opt;
  bool json = false;
  bool quiet = false;
};

void PrintOutcome(const quant::QuantizeOutcome& o) {
  const auto& r = o.result;
  std::printf("%-8s %-10s %10s %6.2f bpw  %s\n", o.type.c_str(), o.skipped ? "skipped" : "done",
              FormatBytes(r.file_bytes).c_str(), r.bits_per_weight, o.path.c_str());
  if (o.skipped)
    std::printf("         (an output made from the same source and settings exists; --force redoes it)\n");
  if (!r.fallbacks.empty()) {
    std::printf(
        "         %zu tensor(s) fell back to another type (row length not a multiple of the block):\n",
        r.fallbacks.size());
    for (const auto& f : r.fallbacks) {
      std::printf("           %-32s ncols %6lld -> %s\n", f.tensor.c_str(), static_cast<long long>(f.ncols),
                  f.type.c_str());
    }
  }
  std::fflush(stdout);
}

nlohmann::json ToJson(const quant::QuantizeOutcome& o) {
  nlohmann::json fb = nlohmann::json::array();
  for (const auto& f : o.result.fallbacks)
    fb.push_back({{"tensor", f.tensor}, {"ncols", f.ncols}, {"type", f.type}});
  nlohmann::json hist;
  for (const auto& [t, s] : o.result.type_histogram) hist[t] = {{"tensors", s.tensors}, {"bytes", s.bytes}};
  return {{"type", o.type},
          {"path", o.path},
          {"skipped", o.skipped},
          {"file_bytes", o.result.file_bytes},
          {"bits_per_weight", o.result.bits_per_weight},
          {"seconds", o.result.seconds},
          {"fallbacks", fb},
          {"tensor_types", hist}};
}

int Run(QuantizeArgs& a) {
  for (const auto& t : a.types) {  // accept both "--types a,b" and repeated flags
    a.opt.types.push_back(t);
  }
  a.opt.progress = !(a.json || a.quiet);
  if (!a.opt.progress) ProgressBar::SetEnabled(false);
  auto r = quant::QuantizeAll(
      a.src, a.opt,
      a.json ? std::function<void(const quant::QuantizeOutcome&)>()
             : [](const quant::QuantizeOutcome& o) { PrintOutcome(o); });
  if (!r) return Fail(r.error().ToString(), r.error().code == ErrorCode::kInvalidArgument ? 2 : 1);
  if (a.json) {
    nlohmann::json j = {{"source", a.src}, {"outputs", nlohmann::json::array()}};
    for (const auto& o : *r) j["outputs"].push_back(ToJson(o));
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

Runner AddQuantizeCommand(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("quantize", "Quantize a GGUF model to one or more types (llama.cpp's quantizer)");
  cmd->add_option("src", a->src, "Source GGUF (F32/F16/BF16 weights)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--types", a->types,
                  "Types, comma-separated: q8_0,q6_k,q5_k_m,q4_k_m,q3_k_m,q2_k,iq4_xs,...")
      ->required()
      ->delimiter(',');
  cmd->add_option("--imatrix", a->opt.imatrix, "Importance matrix (from hone imatrix or llama-imatrix)");
  cmd->add_option("--out-dir", a->opt.out_dir, "Output folder (default: beside the source)");
  cmd->add_option("-t,--threads", a->opt.threads, "Threads (default: all)");
  cmd->add_flag("--force", a->opt.force, "Redo types whose output already exists");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  return [a]() { return Run(*a); };
}

const CommandRegistrar kRegistrar(60, &AddQuantizeCommand);

}  // namespace
}  // namespace hone::cli
