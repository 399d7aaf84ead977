// Measures one model for `hone bench`: size, load, speed, quality, tasks.
#pragma once

#include <string>
#include <vector>

#include "quant/bench.h"

namespace hone::quant {

struct MeasureInputs {
  const BenchOptions* opt = nullptr;
  const std::vector<engine::Token>* corpus = nullptr;  // null: no quality
  const Reference* ref = nullptr;                      // null: no KLD
  Reference* make_ref = nullptr;                       // this model is the reference
  const std::vector<EvalItem>* tasks = nullptr;        // null: no tasks
};

// Never fails: problems become row.ok = false with row.error set.
ModelRow MeasureModel(const std::string& path, const MeasureInputs& in);

// Share of a file's pages resident in the page cache (0..1), -1 when unknown.
double PageCacheResidency(const std::string& path);

}  // namespace hone::quant
