#include "quant/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/logits_eval.h"
#include "util/progress.h"

namespace hone::quant {

void LogSoftmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(n);
  double max = logits[0];
  for (int i = 1; i < n; ++i) max = std::max<double>(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  const double log_sum = std::log(sum) + max;
  for (int i = 0; i < n; ++i) out[i] = logits[i] - log_sum;
}

KldStats SummarizeKld(std::vector<double> klds, int same_top1) {
  KldStats s;
  s.positions = static_cast<int>(klds.size());
  if (klds.empty()) return s;
  double sum = 0;
  for (double k : klds) sum += k;
  s.mean = sum / klds.size();
  std::sort(klds.begin(), klds.end());
  s.median = klds[klds.size() / 2];
  s.p99 = klds[std::min(klds.size() - 1, static_cast<size_t>(std::ceil(0.99 * klds.size())) - 1)];
  s.max = klds.back();
  s.same_top1 = static_cast<double>(same_top1) / klds.size();
  return s;
}

Result<std::vector<engine::Token>> LoadCorpus(const std::string& path, const engine::Tokenizer& tok,
                                              int n_ctx) {
  if (!std::filesystem::is_regular_file(path))
    return MakeError(ErrorCode::kNotFound, "corpus not found: " + path);
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "corpus " + path + " is empty");
  }
  auto tokens = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (!tokens) return tokens.error();
  if (static_cast<int>(tokens->size()) < 2 * n_ctx) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "corpus " + path + " has " + std::to_string(tokens->size()) + " tokens; a context of " +
                         std::to_string(n_ctx) + " needs at least " + std::to_string(2 * n_ctx) +
                         " (two windows, as llama-perplexity requires)");
  }
  return tokens;
}

Result<PplResult> Perplexity(engine::Session& session, const std::vector<engine::Token>& tokens,
                             const PplOptions& opt, Reference* make_ref, const Reference* ref) {
  const int n_ctx = opt.n_ctx;
  const int first = n_ctx / 2;
  int n_windows = static_cast<int>(tokens.size()) / n_ctx;
  if (opt.max_windows > 0) n_windows = std::min(n_windows, opt.max_windows);
  if (n_windows < 1) return MakeError(ErrorCode::kInvalidArgument, "corpus shorter than one window");
  const int n_vocab = session.n_vocab();
  if (ref && (ref->n_vocab != n_vocab)) {
    return MakeError(ErrorCode::kInvalidArgument, "the reference model has a different vocabulary (" +
                                                      std::to_string(ref->n_vocab) + " vs " +
                                                      std::to_string(n_vocab) +
                                                      " tokens): KL divergence needs the same tokenizer");
  }
  const bool bos = engine::AddsBos(session.model());
  const engine::Token bos_token = engine::Tokenizer(session.model()).bos();
  if (make_ref) *make_ref = Reference{n_vocab, {}, {}};

  auto t0 = std::chrono::steady_clock::now();
  double nll = 0, nll2 = 0;
  int count = 0, same_top1 = 0;
  std::vector<double> klds, lp;
  ProgressBar bar("perplexity", n_windows);
  for (int w = 0; w < n_windows; ++w) {
    std::vector<engine::Token> window(tokens.begin() + w * n_ctx, tokens.begin() + (w + 1) * n_ctx);
    if (bos) window[0] = bos_token;
    auto logits = engine::EvalWindowLogits(session, window, first);
    if (!logits) return logits.error();
    // Position j (first <= j < n_ctx-1) predicts the original token j+1.
    for (int j = first; j < n_ctx - 1; ++j) {
      const float* row = logits->data() + static_cast<size_t>(j - first) * n_vocab;
      LogSoftmax(row, n_vocab, lp);
      const double v = -lp[tokens[w * n_ctx + j + 1]];
      nll += v;
      nll2 += v * v;
      const int top = static_cast<int>(std::max_element(lp.begin(), lp.end()) - lp.begin());
      if (make_ref) {
        make_ref->log_probs.insert(make_ref->log_probs.end(), lp.begin(), lp.end());
        make_ref->top1.push_back(top);
      }
      if (ref && static_cast<size_t>(count) < ref->positions()) {
        const float* rp = ref->log_probs.data() + static_cast<size_t>(count) * n_vocab;
        double kld = 0;
        for (int i = 0; i < n_vocab; ++i) kld += std::exp(static_cast<double>(rp[i])) * (rp[i] - lp[i]);
        klds.push_back(std::max(0.0, kld));
        same_top1 += (top == ref->top1[count]);
      }
      ++count;
    }
    bar.Update(w + 1);
  }
  bar.Finish();
  PplResult r;
  r.windows = n_windows;
  r.scored = count;
  const double mean = nll / count;
  r.ppl = std::exp(mean);
  const double var = nll2 / count - mean * mean;
  r.ppl_error = var > 0 && count > 1 ? std::sqrt(var / (count - 1)) * r.ppl : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ref) {
    r.has_kld = true;
    r.kld = SummarizeKld(std::move(klds), same_top1);
  }
  return r;
}

}  // namespace hone::quant
