#include "quant/imatrix_job.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "engine/imatrix.h"
#include "engine/logits_eval.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "quant/files.h"
#include "util/progress.h"

namespace hone::quant {

Result<ImatrixSummary> ComputeImatrix(const std::string& model_path, const std::string& calib,
                                      const std::string& out, const ImatrixOptions& opt) {
  if (!std::filesystem::is_regular_file(calib)) {
    return MakeError(ErrorCode::kNotFound, "calibration file not found: " + calib);
  }
  const std::string text = ReadText(calib);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "calibration file " + calib + " is empty");
  }
  auto model = engine::Model::Load(model_path);
  if (!model) return model.error();
  engine::Tokenizer tok(**model);
  auto tokens = tok.Encode(text, true, false);
  if (!tokens) return tokens.error();
  const int n_ctx = opt.n_ctx;
  int chunks = static_cast<int>(tokens->size()) / n_ctx;
  if (opt.max_chunks > 0) chunks = std::min(chunks, opt.max_chunks);
  if (chunks < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "calibration text has " + std::to_string(tokens->size()) +
                                                      " tokens, fewer than one chunk of " +
                                                      std::to_string(n_ctx));
  }
  engine::ImatrixCollector collector;
  engine::SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_batch = n_ctx;
  so.n_ubatch = std::min(n_ctx, 512);
  so.threads = opt.threads;
  collector.Attach(so);
  auto session = engine::Session::Create(*model, so);
  if (!session) return session.error();

  const bool bos = engine::AddsBos(**model);
  auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("imatrix", chunks);
  for (int c = 0; c < chunks; ++c) {
    std::vector<engine::Token> window(tokens->begin() + c * n_ctx, tokens->begin() + (c + 1) * n_ctx);
    if (bos) window[0] = tok.bos();  // as llama-imatrix: every chunk starts with BOS
    if (Status s = engine::EvalWindow(**session, window); !s.ok()) return s.error();
    bar.Update(c + 1);
  }
  bar.Finish();
  if (auto parent = std::filesystem::path(out).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  if (Status s = collector.Write(out, {calib}, chunks, n_ctx); !s.ok()) return s.error();
  ImatrixSummary r;
  r.chunks = chunks;
  r.tokens = chunks * n_ctx;
  r.entries = static_cast<int>(collector.entries().size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace hone::quant
