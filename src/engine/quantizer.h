// Quantization through llama.cpp's llama_model_quantize: type names as people
// write them (q4_k_m, Q8_0, iq4_xs) and which of them a given model can take.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/gguf_file.h"
#include "util/result.h"

namespace hone::engine {

struct QuantType {
  std::string name;            // canonical upper-case name, e.g. "Q4_K_M" (used in file names)
  int ftype = 0;               // llama_ftype
  int block = 32;              // block size of its main tensor type: 256 for K/IQ types
  bool needs_imatrix = false;  // llama.cpp refuses these without an importance matrix
};

// Every type hone offers, smallest bits per weight last.
const std::vector<QuantType>& QuantTypes();
// Case-insensitive; accepts llama-quantize's aliases (Q4_K = Q4_K_M).
Result<QuantType> ParseQuantType(const std::string& name);

// Importance data per weight tensor name, already divided by its counts (the
// form llama_model_quantize wants).
using ImatrixData = std::map<std::string, std::vector<float>>;

// The types `src` can take: its weights must be F32/F16/BF16 (no requantizing),
// and imatrix-only types need `have_imatrix`.
std::vector<QuantType> SupportedQuantTypes(const GgufFile& src, bool have_imatrix);

struct QuantizeRequest {
  std::string src;
  std::string dst;
  QuantType type;
  int threads = 0;                       // 0 = all hardware threads
  const ImatrixData* imatrix = nullptr;  // optional
  std::string imatrix_file;              // recorded in the output's metadata
};

// A weight tensor that llama.cpp stored in another type than the mix planned
// because its rows do not split into the planned type's blocks.
struct Fallback {
  std::string tensor;
  int64_t ncols = 0;
  std::string type;  // what it got, e.g. "q5_0"
};

struct QuantizeResult {
  uint64_t file_bytes = 0;
  double bits_per_weight = 0;
  double seconds = 0;
  std::vector<Fallback> fallbacks;
  std::map<std::string, TypeShare> type_histogram;
};

// Writes req.dst. `on_progress` gets 0..1 (estimated from the bytes written).
// Errors: kNotFound/kCorrupt (source), kUnsupported (a type the model cannot
// take; the message lists those it can), kInternal (llama.cpp failed).
Result<QuantizeResult> Quantize(const QuantizeRequest& req,
                                const std::function<void(double)>& on_progress = {});

// Reads back what a finished quantization produced (size, bpw, fallbacks).
Result<QuantizeResult> DescribeQuantized(const std::string& path, const QuantType& type);

}  // namespace hone::engine
