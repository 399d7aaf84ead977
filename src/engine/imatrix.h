// Importance matrix: for every weight matrix, the mean square of each input
// column over calibration text, gathered from the activations llama.cpp feeds
// into matrix multiplications (ggml's evaluation callback), as llama-imatrix does.
// Written and read in llama.cpp's GGUF imatrix format (<name>.in_sum2 and
// <name>.counts tensors, imatrix.* metadata), which `llama-quantize --imatrix` reads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/quantizer.h"
#include "engine/session.h"
#include "util/result.h"

namespace hone::engine {

class ImatrixCollector {
 public:
  // Set both on SessionOptions before Session::Create.
  static bool Callback(ggml_tensor* t, bool ask, void* user_data);
  void Attach(SessionOptions& opts) {
    opts.eval_callback = &ImatrixCollector::Callback;
    opts.eval_callback_data = this;
  }

  struct Entry {
    std::vector<double> sums;     // sum of x^2 per input column (per expert matrix)
    std::vector<int64_t> counts;  // rows seen per matrix
  };
  const std::map<std::string, Entry>& entries() const { return entries_; }

  // Writes the GGUF imatrix file. chunk_size: tokens per chunk of calibration.
  Status Write(const std::string& path, const std::vector<std::string>& datasets, int chunk_count,
               int chunk_size) const;

 private:
  bool Collect(ggml_tensor* t);
  // mu_ guards entries_ and scratch_: ggml calls Collect from its compute
  // threads, which may run graph nodes of one batch at once.
  std::mutex mu_;
  std::map<std::string, Entry> entries_;  // GUARDED_BY(mu_); read by entries() only after the run
  std::vector<char> scratch_;             // GUARDED_BY(mu_): a tensor's rows copied off the backend
};

// Reads an imatrix file (GGUF format) into what llama_model_quantize takes:
// per tensor, the sums divided by their counts.
// Errors: kNotFound, kCorrupt (not an imatrix file).
Result<ImatrixData> ReadImatrix(const std::string& path);

}  // namespace hone::engine
