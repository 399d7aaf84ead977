// Memory read bandwidth: a STREAM-style multi-threaded sum over a buffer much
// larger than the caches, repeated within a time budget.
#pragma once

#include <cstdint>
#include <vector>

#include "hw/probe.h"
#include "util/result.h"

namespace hone::hw {

struct BandwidthOptions {
  int threads = 1;
  uint64_t buffer_bytes = 256ull << 20;  // split evenly between the threads
  double seconds = 1.0;                  // budget, filling the buffer included
  // Thread i runs on pin_cpus[i]; threads beyond the list (or where pinning
  // is refused) float.
  std::vector<int> pin_cpus;
};

// At least three timed runs (plus one warm-up) even if they overrun the budget,
// so the mean has a confidence interval.
Result<Bandwidth> MeasureReadBandwidth(const BandwidthOptions& options);

}  // namespace hone::hw
