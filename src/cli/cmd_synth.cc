// `hone synth --like qwen2.5-0.5b --out FILE`: a random-weight model with a
// real model's exact shapes and tokenizer, for speed work without downloads.
#include <cstdio>

#include "cli/commands.h"
#include "synth/synth.h"
#include "util/format.h"
#include "util/progress.h"

namespace hone::cli {
namespace {

struct SynthArgs {
  std::string like = "qwen2.5-0.5b";
  std::string out;
  std::string type = "f16";
  uint64_t seed = 42;
  std::string vocab;
  bool list = false;
};

}  // namespace

namespace {

Runner AddSynthCommand(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* cmd =
      app.add_subcommand("synth", "Write a random-weight GGUF with a real model's shapes and tokenizer");
  cmd->add_option("--like", a->like, "Shape: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b or tiny")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "Output GGUF path");
  cmd->add_option("--type", a->type, "Weight type: f16, bf16 or f32")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  cmd->add_option("--vocab", a->vocab,
                  "Vocab-only GGUF to take the tokenizer from (default: llama.cpp's qwen2)");
  cmd->add_flag("--list", a->list, "List the known shapes and exit");
  return [a]() {
    if (a->list) {
      for (auto& s : synth::KnownShapes()) {
        std::printf("%-14s %s n_embd %lld, %lld layers, %lld/%lld heads, ff %lld, vocab %lld, %s params\n",
                    s.name.c_str(), s.arch.c_str(), (long long)s.n_embd, (long long)s.n_layer,
                    (long long)s.n_head, (long long)s.n_head_kv, (long long)s.n_ff, (long long)s.n_vocab,
                    FormatCount(synth::ParameterCount(s)).c_str());
      }
      return 0;
    }
    if (a->out.empty()) return Fail("--out FILE is required", 2);
    synth::SynthOptions o;
    o.like = a->like;
    o.out_path = a->out;
    o.type = a->type;
    o.seed = a->seed;
    o.vocab_path = a->vocab;
    auto bar = std::make_shared<ProgressBar>("synth " + a->like, 1000);
    o.on_progress = [bar](double f) { bar->UpdateFraction(f); };
    auto r = synth::Synthesize(o);
    if (!r) return Fail(r.error().ToString());
    bar->Finish();
    std::printf("wrote %s: %s parameters (%llu), %s, %d tensors\n", r->path.c_str(),
                FormatCount(r->n_params).c_str(), (unsigned long long)r->n_params,
                FormatBytes(r->file_bytes).c_str(), r->n_tensors);
    return 0;
  };
}

const CommandRegistrar kRegistrar(40, &AddSynthCommand);

}  // namespace

}  // namespace hone::cli
