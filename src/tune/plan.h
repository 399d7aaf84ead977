// Planning a tune before anything is measured: the workload checked against
// the model and this machine's memory, the time budget against the cost of one
// trial, and the search space's inputs (which knobs this machine and build can
// change). `hone tune` (cli/cmd_tune.cc) only parses flags and prints.
#pragma once

#include <functional>
#include <string>

#include "engine/gguf_file.h"
#include "hw/probe.h"
#include "tune/measure.h"
#include "tune/search_space.h"
#include "util/result.h"

namespace hone::tune {

// What the user asked for, as `hone tune`'s flags give it.
struct TuneRequest {
  std::string model;
  std::string workload = "chat";
  int prompt_tokens = 128;
  int gen_tokens = 64;
  int ctx = 0;  // 0: just enough for the workload
  int concurrency = 4;
  double min_stream_tps = 0;
  std::string budget = "5m";
  bool exhaustive = false;
};

// Everything checked before any measuring starts.
struct Plan {
  WorkloadSpec spec;
  double budget_s = 0;
  engine::GgufFile gguf;
  hw::MachineInfo machine;
};

// Checks the request, reads the model's header and probes the machine
// (`say` hears "probing the machine" first; bandwidth takes about a second).
// Errors: kInvalidArgument (a flag out of range, a budget too small for one
// trial: the user's to fix), kNotFound / kCorrupt (the model), kOutOfMemory
// (the context cannot fit beside the weights), and the probe's errors.
Result<Plan> MakePlan(const TuneRequest& r, const std::function<void(const std::string&)>& say);

// A deliberately rough cost of one trial (load, warm-up, two repetitions):
// prefill at 50 GFLOP/s per core, decode at the memory-bandwidth roofline.
double EstimateTrialSeconds(const Plan& p);

// The search space's inputs: the workload, and what this process may change
// (mlock within RLIMIT_MEMLOCK, poll without OpenMP, AMX where usable).
SpaceRequest SpaceRequestFor(const Plan& p);

}  // namespace hone::tune
