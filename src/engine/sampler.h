// Sampling: turns logits into the next token. One Sampler per sequence,
// since penalties and the RNG carry state across tokens.
//
// llama_sampler_sample builds a candidate array of the whole vocabulary
// (151,936 entries for Qwen, ~1.8 MB written per token) before top-k cuts it
// to a few dozen: about half a millisecond per token and sequence, which is
// 5-10% of a decode step for a small model on many cores. When the chain
// starts with top-k (or is greedy) and nothing before it needs every token (no
// grammar, no penalties), hone selects the top k logits itself in one pass
// and runs the same chain on those: the same tokens, from the same RNG.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/session.h"
#include "engine/tokenizer.h"
#include "util/result.h"

struct llama_sampler;

namespace hone::engine {

struct SamplingOptions {
  float temperature = 0.8f;     // <= 0: greedy (always the most likely token)
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint32_t seed = 0xFFFFFFFF;  // 0xFFFFFFFF: random
  std::string grammar;         // GBNF; empty = unconstrained
  // A lazy grammar applies from the first trigger on (a tool call's opening
  // marker, engine/chat.h); the text before it is free.
  bool grammar_lazy = false;
  std::vector<std::string> grammar_trigger_patterns;  // regular expressions over the output
  std::vector<Token> grammar_trigger_tokens;
  std::vector<Token> grammar_prefill;  // already in the prompt; the grammar sees them first
  // Always hand llama.cpp's chain every vocabulary entry (see Sampler); only
  // tests set it, to check that the shortcut picks the same tokens.
  bool full_vocab = false;
  bool greedy() const { return temperature <= 0; }
};

class Sampler {
 public:
  // Errors: kInvalidArgument for out-of-range values or a grammar that does not parse.
  static Result<std::unique_ptr<Sampler>> Create(const Model& model, const SamplingOptions& options);
  ~Sampler();

  // Samples from output `index` of the session's last Decode and records it.
  Token Sample(Session& session, int index);
  void Accept(Token token);  // record a token the sampler did not choose (e.g. the prompt)
  void Reset();

 private:
  Sampler() = default;
  llama_sampler* chain_ = nullptr;
  int prefilter_k_ = 0;  // > 0: the shortcut above, keeping this many candidates
  int n_vocab_ = 0;
  struct Candidates;  // llama_token_data, reused across tokens
  std::unique_ptr<Candidates> top_;
};

// Stop strings across streamed text: holds back any tail that could still
// become a stop string, so a client never sees half of one.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Feeds new text; returns what is safe to emit now. After a match,
  // stopped() is true and the stop string and anything after it are dropped.
  std::string Push(const std::string& text);
  std::string Flush();  // end of generation: release the held-back tail
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that ended it

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace hone::engine
