// In-process trials through the engine layer: loads the model (again only when
// the load mode or repacking changes), creates a Session per configuration,
// warms it up, then times the workload and returns one Sample per repetition.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "engine/tokenizer.h"
#include "tune/isolation.h"
#include "tune/search.h"

namespace hone::tune {

struct WorkloadSpec {
  Workload workload = Workload::kChat;
  int prompt_tokens = 128;
  int gen_tokens = 64;
  int concurrency = 1;         // batch and server: sequences decoded together
  double min_stream_tps = 0;   // server: each stream must decode at least this fast
  uint32_t n_ctx = 0;          // KV cells for all sequences together
  uint64_t memory_budget = 0;  // bytes a session may add (0 = no check)
  // A repetition runs the workload again until it has taken this long and
  // reports the average: tiny models answer in milliseconds, where timer and
  // scheduler noise would otherwise swamp the differences.
  double min_rep_seconds = 0.25;
  // The hone executable, for running each new kernel path once in a child
  // before measuring it in-process (tune/isolation.h); empty: no isolation.
  std::string isolate_with;
};

// What a workload's score means, for tables and the profile.
std::string ObjectiveDescription(Workload w);

class Measurer {
 public:
  Measurer(std::string model_path, WorkloadSpec spec);
  ~Measurer();

  // The MeasureFn for Search.
  Result<std::vector<Sample>> Measure(const Config& c, int reps);
  int isolated_children() const { return guard_.children_run(); }
  // The model currently loaded (after a Measure call), for its metadata.
  std::shared_ptr<engine::Model> model() const { return model_; }

 private:
  Status Prepare(const Config& c);
  Result<Sample> RunOnce(const Config& c);
  Result<Sample> RunWorkload();
  Result<Sample> RunSingle();
  Result<Sample> RunParallel();

  std::string path_;
  WorkloadSpec spec_;
  CrashGuard guard_;
  std::shared_ptr<engine::Model> model_;
  Config model_config_;
  std::unique_ptr<engine::Session> session_;
  std::string session_key_;
  std::vector<engine::Token> prompt_;
  std::vector<engine::Token> reference_;  // greedy tokens with f16 KV, for quality
  std::vector<int> main_cpus_;            // the main thread's affinity before any trial
};

}  // namespace hone::tune
