// Embeddings: one pooled, L2-normalised vector per input text.
#pragma once

#include <string>
#include <vector>

#include "engine/session.h"
#include "util/result.h"

namespace hone::engine {

struct EmbedResult {
  std::vector<std::vector<float>> vectors;
  int n_tokens = 0;  // prompt tokens over all inputs (for usage accounting)
};

// The session must have been created with embeddings = true, and n_seq_max
// bounds how many texts go into one decode. Errors: kInvalidArgument for an
// empty text or one longer than the context.
Result<EmbedResult> Embed(Session& session, const std::vector<std::string>& texts, bool normalize = true);

}  // namespace hone::engine
