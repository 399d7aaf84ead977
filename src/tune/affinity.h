// Checks that CPU pinning really took effect: some llama.cpp builds have
// silently ignored thread placement. Reads Cpus_allowed_list of every thread
// of this process from /proc/self/task/*/status.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace hone::tune {

struct ThreadAffinity {
  int tid = 0;
  std::vector<int> cpus;  // Cpus_allowed_list
};

// Parses a kernel CPU list ("0-3,8,10-11"); error on malformed text.
Result<std::vector<int>> ParseKernelCpuList(const std::string& text);
// Cpus_allowed_list from the text of a /proc/<pid>/task/<tid>/status file.
Result<std::vector<int>> CpusAllowedFromStatus(const std::string& status_text);

// Every thread of this process. `proc_root` lets tests point at a fixture tree
// laid out as <root>/self/task/<tid>/status.
Result<std::vector<ThreadAffinity>> ReadThreadAffinities(const std::string& proc_root = "/proc");

// True when at least `n_threads` threads are confined to a subset of `cpus`
// (the ggml workers plus the main thread, which ggml pins as worker 0).
bool PlacementTookEffect(const std::vector<ThreadAffinity>& threads, const std::vector<int>& cpus,
                         int n_threads);

// The calling thread's affinity, to restore after a pinned trial: ggml pins
// the main thread to worker 0's CPUs and never unpins it.
std::vector<int> CurrentThreadCpus();
void SetCurrentThreadCpus(const std::vector<int>& cpus);

}  // namespace hone::tune
