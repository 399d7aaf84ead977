// Flags shared by every subcommand that loads a model and runs it (run, and
// later tune/bench/serve): load mode, threads, batch sizes, attention, KV type.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "util/result.h"

namespace hone::cli {

struct EngineFlags {
  int ctx = 4096;
  int batch = 2048;
  int ubatch = 512;
  int threads = 0;
  int threads_batch = 0;
  std::string flash_attn = "auto";
  std::string kv_type = "f16";
  std::string load_mode = "mmap";
  bool no_repack = false;
  bool no_amx = false;
  std::string cpus;        // "0-3,8"
  std::string cpus_batch;  // prefill's own CPUs; empty = --cpus
  bool cpu_strict = false;
  int poll = 50;

  void Register(CLI::App* cmd);
  Result<engine::LoadOptions> ToLoadOptions() const;
  Result<engine::SessionOptions> ToSessionOptions() const;

  // A tuned profile (hone tune) fills in the run parameters the user did not
  // give: after ApplyProfile, this writes back only the flags that were given
  // on the command line, so they win. Needs Register() to have been called.
  bool Given(const std::string& flag) const;
  Status ReapplyExplicit(engine::SessionOptions* session, engine::LoadOptions* load) const;

 private:
  CLI::App* cmd_ = nullptr;
};

struct SamplingFlags {
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  long long seed = -1;

  void Register(CLI::App* cmd);
  engine::SamplingOptions ToOptions() const;
};

// Loads a model with a progress bar on stderr (plain lines when not a TTY).
Result<std::shared_ptr<engine::Model>> LoadModelWithProgress(const std::string& path,
                                                             const engine::LoadOptions& options, bool quiet);

}  // namespace hone::cli
