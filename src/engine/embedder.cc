#include "engine/embedder.h"

#include <llama.h>

#include <cmath>

#include "engine/batch_decoder.h"
#include "engine/tokenizer.h"

namespace hone::engine {

Result<EmbedResult> Embed(Session& session, const std::vector<std::string>& texts, bool normalize) {
  if (!session.options().embeddings) {
    return MakeError(ErrorCode::kInvalidArgument, "the session was not created for embeddings");
  }
  Tokenizer tok(session.model());
  const int n_embd = session.n_embd();
  const int n_ctx_seq = static_cast<int>(session.n_ctx() / session.options().n_seq_max);
  const int n_ubatch = static_cast<int>(session.options().n_ubatch);
  EmbedResult out;
  out.vectors.reserve(texts.size());
  for (const std::string& text : texts) {
    if (text.empty()) return MakeError(ErrorCode::kInvalidArgument, "cannot embed an empty text");
    auto tokens = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
    if (!tokens) return tokens.error();
    if (tokens->empty()) return MakeError(ErrorCode::kInvalidArgument, "cannot embed an empty text");
    int n = static_cast<int>(tokens->size());
    // Non-causal pooling needs the whole text in one ubatch.
    if (n > n_ctx_seq || n > n_ubatch) {
      return MakeError(ErrorCode::kInvalidArgument, "text of " + std::to_string(n) +
                                                        " tokens is longer than the embedding context (" +
                                                        std::to_string(std::min(n_ctx_seq, n_ubatch)) + ")");
    }
    out.n_tokens += n;
    session.ClearSequence(0);
    BatchDecoder batch(session, n);
    for (int i = 0; i < n; ++i) batch.Add(0, (*tokens)[i], i, true);
    if (Status s = batch.Decode(); !s) return s.error();
    const float* e = session.Embeddings(0);
    if (!e) e = llama_get_embeddings_ith(session.raw(), n - 1);  // no pooling: last token
    if (!e) return MakeError(ErrorCode::kInternal, "the model produced no embedding");
    std::vector<float> v(e, e + n_embd);
    if (normalize) {
      double norm = 0;
      for (float x : v) norm += static_cast<double>(x) * x;
      norm = std::sqrt(norm);
      if (norm > 0) {
        for (float& x : v) x = static_cast<float>(x / norm);
      }
    }
    out.vectors.push_back(std::move(v));
  }
  session.ClearSequence(0);
  return out;
}

}  // namespace hone::engine
