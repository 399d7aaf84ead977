// Draft tokens for speculative decoding without a second model: llama.cpp's
// n-gram drafters (common/speculative.h), which look for the tokens just
// generated earlier in the sequence (the prompt included) and propose what
// followed them there. Support answers restate order numbers, addresses and
// policy text from the prompt: there the drafts are often right, and the
// target checks several of them in one decode step.
//
// The drafts never change the output: the caller samples the target at each
// drafted position in turn and keeps a draft only while it equals what was
// sampled (a deterministic draft makes this llama.cpp's exact accept rule,
// common_sampler_sample_and_accept_n).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer.h"
#include "util/result.h"

struct common_speculative;

namespace hone::engine {

class Drafter {
 public:
  // `mode`: one of DraftModes() ("ngram-simple", "ngram-map-k", ...), or a
  // comma-separated list tried in order. `n_seq`: sequences (server slots).
  // `ngram`: tokens the lookup matches (the n of ngram-simple and the map
  // modes; llama.cpp's default is 12); 0 keeps llama.cpp's defaults.
  static Result<std::unique_ptr<Drafter>> Create(const std::string& mode, int n_seq, int ngram = 0);
  ~Drafter();
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  static std::vector<std::string> DraftModes();
  const std::string& mode() const { return mode_; }

  // A new generation on `seq`, whose context starts with `prompt`.
  void Begin(int seq, const std::vector<Token>& prompt);
  // Up to `n_max` tokens to follow `history` (every token in the sequence's
  // KV so far) and then `last` (sampled, not yet decoded). Empty: no guess.
  std::vector<Token> Draft(int seq, const std::vector<Token>& history, Token last, int n_max);
  // How many of the last draft the target kept (some drafters learn from it).
  void Accept(int seq, int n_accepted);

 private:
  Drafter() = default;
  std::string mode_;
  common_speculative* spec_ = nullptr;
  std::vector<bool> drafted_;  // per sequence: a draft is out, awaiting Accept
};

}  // namespace hone::engine
