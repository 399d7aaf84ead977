// `hone bench`: speed and quality of a set of GGUF models side by side.
// Each model is measured in turn (size, load, speed, perplexity, agreement with
// a reference, task checks); a model that fails is reported as failed and the
// others complete. Measurements are cached by file hash and settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session.h"
#include "quant/eval_suite.h"
#include "quant/perplexity.h"
#include "util/result.h"

namespace hone::quant {

struct BenchOptions {
  std::vector<std::string> models;
  std::string dir;     // every *.gguf in it (added to models)
  std::string ref;     // reference for KLD; default: the largest type
  std::string corpus;  // perplexity/KLD text; empty = skip quality
  std::string eval;    // task suite; empty = skip tasks
  int ctx = 256;
  int chunks = 0;  // windows of the corpus; 0 = all
  int threads = 0;
  engine::FlashAttn flash_attn = engine::FlashAttn::kAuto;  // --flash-attn; auto: a profile's, else off
  int prompt_tokens = 128;                                  // speed: prefill length
  int gen_tokens = 32;                                      // speed: tokens decoded
  int reps = 3;                                             // speed repetitions (after one warm-up)
  bool speed = true;
  bool use_profile = true;  // apply `hone tune`'s profile for a model when one exists
  std::string cache_dir;    // empty = no cache
  bool quiet = false;
  // Speculative decoding per model (--spec MODE, --draft MODEL): MODE
  // against none on spec_prompts (empty: tune's default prompts).
  std::string spec, draft;
  std::vector<std::string> spec_prompts;
};

struct TaskResult {
  std::string id, kind, lang;
  bool pass = false;
  std::string detail, answer;
};

struct ModelRow {
  std::string path, name, type;  // type: llama.cpp's file type, e.g. "Q4_K - Medium"
  bool ok = true;
  std::string error;
  bool is_ref = false;
  bool cached = false;
  std::string profile;  // the tuned profile applied, if any
  uint64_t file_bytes = 0;
  double bpw = 0;
  double load_s = 0;
  double page_cache_warm = 0;  // share of the file in the page cache before loading
  bool amx = false;            // weights ran on Intel AMX kernels (engine/amx.h)
  uint64_t peak_rss = 0;       // peak resident memory while this model ran, bytes
  // speed (means and 95% CI half-widths)
  double prefill_tps = 0, prefill_ci = 0, decode_tps = 0, decode_ci = 0, ttft_ms = 0;
  // quality
  bool has_ppl = false;
  double ppl = 0, ppl_err = 0;
  bool has_kld = false;
  KldStats kld;
  std::vector<TaskResult> tasks;
  // speculation (--spec): decode tok/s with it, its speedup over none
  // (paired, mean and 95% CI), the share of drafts kept, and how many of the
  // greedy generations differed from none's (0: token-identical on this type)
  bool has_spec = false;
  std::string spec_mode, spec_error;
  double spec_tps = 0, spec_speedup = 0, spec_speedup_ci = 0, spec_acceptance = 0;
  int spec_generations = 0, spec_differing = 0;
  int tasks_passed() const;
  double pass_rate() const { return tasks.empty() ? 0 : static_cast<double>(tasks_passed()) / tasks.size(); }
};

struct BenchResult {
  std::vector<ModelRow> rows;
  std::string ref_path;
  std::string machine;  // one-line machine description
  BenchOptions options;
};

// Errors only for problems with the whole run (no models, bad corpus or eval
// file); a model that cannot be measured becomes a failed row.
Result<BenchResult> RunBench(const BenchOptions& opt);

}  // namespace hone::quant
