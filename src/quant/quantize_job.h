// `hone quantize`: one source model to several types, skipping outputs whose
// recorded inputs (source hash, type, imatrix hash) match.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/quantizer.h"
#include "util/result.h"

namespace hone::quant {

struct QuantizeJobOptions {
  std::vector<std::string> types;  // as the user wrote them
  std::string imatrix;             // optional imatrix file
  std::string out_dir;             // default: beside the source
  int threads = 0;
  bool force = false;  // redo even when a matching output exists
  bool progress = true;
};

struct QuantizeOutcome {
  std::string type;
  std::string path;
  bool skipped = false;  // matching output already existed
  engine::QuantizeResult result;
};

// Validates every type first (an unknown or unsupported type fails before any
// work, naming the types the model can take), then quantizes in order.
// `on_done` is called after each type (for streaming output).
Result<std::vector<QuantizeOutcome>> QuantizeAll(
    const std::string& src, const QuantizeJobOptions& opt,
    const std::function<void(const QuantizeOutcome&)>& on_done = {});

}  // namespace hone::quant
