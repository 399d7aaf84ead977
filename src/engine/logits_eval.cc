#include "engine/logits_eval.h"

#include <llama.h>

#include <algorithm>
#include <cstring>

namespace hone::engine {

namespace {

// out == nullptr: request outputs for every position (so llama.cpp does not
// prune the last layer to the output rows) but copy none.
Status Eval(Session& session, const std::vector<Token>& window, int first, std::vector<float>* out_ptr) {
  const int n = static_cast<int>(window.size());
  if (n == 0 || first < 0 || first >= n) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "window of " + std::to_string(n) + " tokens, first output " + std::to_string(first));
  }
  if (n > static_cast<int>(session.n_ctx())) {
    return MakeError(ErrorCode::kInvalidArgument, "window of " + std::to_string(n) +
                                                      " tokens exceeds the context of " +
                                                      std::to_string(session.n_ctx()));
  }
  const int n_vocab = session.n_vocab();
  const int n_batch = static_cast<int>(session.n_batch());
  session.ClearSequence(-1);
  std::vector<float> scratch;
  std::vector<float>& out = out_ptr ? *out_ptr : scratch;
  if (out_ptr) out.reserve(static_cast<size_t>(n - first) * n_vocab);
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  Status status;
  for (int start = 0; start < n && status.ok(); start += n_batch) {
    const int len = std::min(n_batch, n - start);
    int n_out = 0;
    batch.n_tokens = len;
    for (int k = 0; k < len; ++k) {
      batch.token[k] = window[start + k];
      batch.pos[k] = start + k;
      batch.n_seq_id[k] = 1;
      batch.seq_id[k][0] = 0;
      batch.logits[k] = (start + k >= first);
      n_out += batch.logits[k];
    }
    if (int rc = session.Decode(batch); rc != 0) {
      status = MakeError(ErrorCode::kInternal, "llama_decode failed with code " + std::to_string(rc));
      break;
    }
    if (n_out > 0 && out_ptr) {
      const float* logits = llama_get_logits(session.raw());
      out.insert(out.end(), logits, logits + static_cast<size_t>(n_out) * n_vocab);
    }
  }
  llama_batch_free(batch);
  return status;
}

}  // namespace

Result<std::vector<float>> EvalWindowLogits(Session& session, const std::vector<Token>& window, int first) {
  std::vector<float> out;
  if (Status s = Eval(session, window, first, &out); !s.ok()) return s.error();
  return out;
}

Status EvalWindow(Session& session, const std::vector<Token>& window) {
  return Eval(session, window, 0, nullptr);
}

bool AddsBos(const Model& model) { return llama_vocab_get_add_bos(model.vocab()); }

}  // namespace hone::engine
