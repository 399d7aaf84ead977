// Scoring text with a model: the logits of every position of a window, as
// llama-perplexity computes them (one sequence, KV cache cleared per window).
#pragma once

#include <vector>

#include "engine/session.h"
#include "engine/tokenizer.h"
#include "util/result.h"

namespace hone::engine {

// Evaluates `window` from position 0 in sequence 0 (after clearing the cache)
// and returns the logits of positions [first, window.size()), row-major,
// n_vocab floats per position. Decodes in the session's n_batch chunks.
Result<std::vector<float>> EvalWindowLogits(Session& session, const std::vector<Token>& window, int first);

// The same forward pass, keeping no logits (but still computing every
// position through every layer, which the imatrix collector needs).
Status EvalWindow(Session& session, const std::vector<Token>& window);

// Whether the model's tokenizer starts text with BOS (llama-perplexity then
// puts BOS at the start of every window).
bool AddsBos(const Model& model);

}  // namespace hone::engine
