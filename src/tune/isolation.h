// Crash isolation for trials. Trials run in-process (a model load per layout,
// a session per configuration), so one configuration whose kernels fault (a
// buffer type such as AMX, repacking, flash attention, a quantized KV cache)
// would take the whole tune down with it. Before such a kernel path is first
// measured, the configuration runs once in a child `hone run` (a fresh
// process: see util/isolated.h on why not fork); a child that dies by a signal,
// hangs or fails turns that path into a failed trial with the reason, and the
// search goes on.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tune/config.h"
#include "util/result.h"

namespace hone::tune {

struct IsolationOptions {
  std::string hone_binary;  // the hone executable; empty: no isolation (library use)
  std::string model;
  int prompt_tokens = 128;
  double timeout_s = 180;
};

class CrashGuard {
 public:
  explicit CrashGuard(IsolationOptions o) : o_(std::move(o)) {}

  // Ok, or why this configuration is not to be measured in-process: its
  // kernel path crashed or failed in a child. Each path is tried once.
  Status Check(const Config& c);
  // What selects the kernels: layout (repack, AMX), attention, KV type.
  static std::string PathKey(const Config& c);
  // The child's command line: `hone run MODEL` with this configuration's flags.
  std::vector<std::string> ChildArgs(const Config& c) const;
  int children_run() const { return children_; }

 private:
  IsolationOptions o_;
  std::map<std::string, Status> verdicts_;  // by PathKey
  int children_ = 0;
};

}  // namespace hone::tune
