// `hone imatrix`: run calibration text through a model with the imatrix
// collector attached and write llama.cpp's GGUF imatrix file.
#pragma once

#include <string>

#include "util/result.h"

namespace hone::quant {

struct ImatrixOptions {
  int n_ctx = 512;     // tokens per chunk (llama-imatrix's default)
  int max_chunks = 0;  // 0 = the whole calibration text
  int threads = 0;
};

struct ImatrixSummary {
  int chunks = 0;
  int tokens = 0;
  int entries = 0;  // weight tensors with data
  double seconds = 0;
};

// Errors: model load errors, kNotFound/kInvalidArgument for the calibration
// text (missing, empty, shorter than one chunk), kIo writing `out`.
Result<ImatrixSummary> ComputeImatrix(const std::string& model, const std::string& calib,
                                      const std::string& out, const ImatrixOptions& opt);

}  // namespace hone::quant
