// Perplexity and agreement with a reference model, computed the way
// llama-perplexity does: the corpus is tokenized once (with BOS), cut into
// non-overlapping windows of n_ctx tokens (BOS replacing each window's first
// token), and only the second half of each window is scored, so every scored
// token has at least n_ctx/2 tokens of context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session.h"
#include "engine/tokenizer.h"
#include "util/result.h"

namespace hone::quant {

struct PplOptions {
  int n_ctx = 256;
  int max_windows = 0;  // 0 = every full window of the corpus
};

// The reference model's log-probabilities at each scored position, kept in
// memory (n_vocab floats a position) so other models can be compared in the
// same run without writing logit files.
struct Reference {
  int n_vocab = 0;
  std::vector<float> log_probs;  // positions x n_vocab
  std::vector<int32_t> top1;     // argmax per position
  size_t positions() const { return top1.size(); }
};

struct KldStats {
  double mean = 0, median = 0, p99 = 0, max = 0;
  double same_top1 = 0;  // share of positions where both models' top token agree
  int positions = 0;
};

struct PplResult {
  double ppl = 0;
  double ppl_error = 0;  // llama-perplexity's ± (standard error of the mean NLL, times PPL)
  int windows = 0;
  int scored = 0;  // scored tokens
  double seconds = 0;
  bool has_kld = false;
  KldStats kld;
};

// Reads and tokenizes a corpus; errors name the problem: missing file (kNotFound),
// empty file or fewer than 2 * n_ctx tokens (kInvalidArgument).
Result<std::vector<engine::Token>> LoadCorpus(const std::string& path, const engine::Tokenizer& tok,
                                              int n_ctx);

// Scores `tokens`. With `make_ref` the log-probs are stored for later
// comparisons; with `ref` (from the same corpus and settings) KL divergence
// and top-1 agreement against it are computed too.
Result<PplResult> Perplexity(engine::Session& session, const std::vector<engine::Token>& tokens,
                             const PplOptions& opt, Reference* make_ref = nullptr,
                             const Reference* ref = nullptr);

// log-softmax of one row, in double for accuracy on large vocabularies.
void LogSoftmax(const float* logits, int n, std::vector<double>& out);

// Summarizes per-position KL divergences.
KldStats SummarizeKld(std::vector<double> klds, int same_top1);

}  // namespace hone::quant
