// Draft tokens for speculative decoding, with llama.cpp's drafters
// (common/speculative.h):
// - n-gram modes, no second model: each sequence looks for the tokens just
//   generated earlier in its own context (the prompt included) and proposes
//   what followed them there. Support answers restate order numbers,
//   addresses and policy text from the prompt: there the drafts are often right.
// - a draft model ("draft-simple", `--draft MODEL`): a small model with the
//   target's vocabulary proposes the next tokens greedily, for every asking
//   sequence in one batch per drafted position.
//
// The drafts never change the output: the caller samples the target at each
// drafted position in turn and keeps a draft only while it equals what was
// sampled (a deterministic draft makes this llama.cpp's exact accept rule,
// common_sampler_sample_and_accept_n).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/session.h"
#include "engine/tokenizer.h"
#include "util/result.h"

struct common_speculative;

namespace hone::engine {

struct DrafterOptions {
  // One of DraftModes(), or a comma-separated list tried in order (the first
  // that drafts wins). Empty or "none" with a draft session: "draft-simple".
  std::string mode;
  int n_seq = 1;       // sequences (server slots)
  int ngram = 0;       // tokens the n-gram lookup matches; 0: llama.cpp's defaults (12)
  int max_draft = 16;  // most tokens one draft may hold
  // The draft model's own context (n_seq_max = n_seq): for "draft-simple".
  // `target` is checked against it: the same vocabulary, token by token.
  std::unique_ptr<Session> draft_session;
  const Session* target = nullptr;
};

class Drafter {
 public:
  // Errors: kInvalidArgument (unknown mode, a draft model without the
  // target's vocabulary, draft-simple without a draft model).
  static Result<std::unique_ptr<Drafter>> Create(DrafterOptions options);
  ~Drafter();
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  static std::vector<std::string> DraftModes();
  // Whether `mode` (as --spec takes it: "auto", "none" or modes) can run,
  // with or without a draft model; the message says what is wrong.
  static Status CheckMode(const std::string& mode, bool has_draft_model);
  const std::string& mode() const { return mode_; }
  bool has_draft_model() const { return draft_ != nullptr; }

  // A new generation on `seq`, whose context starts with `prompt`.
  void Begin(int seq, const std::vector<Token>& prompt);

  // Batched drafting: Ask for each sequence that wants a draft, then
  // DraftAsked once, then Take each sequence's draft (maybe empty).
  // `history`: every token in the sequence's KV so far; `last`: sampled,
  // not yet decoded; it must stay unchanged until DraftAsked returns (it is
  // read, not copied). The draft model catches up on history it has not seen
  // (a restored prefix, a prompt) at most kCatchUpPerStep tokens per
  // sequence per call, so one long prompt never stalls a step; until it has
  // caught up that sequence gets no draft from it.
  void Ask(int seq, const std::vector<Token>& history, Token last, int n_max);
  void DraftAsked();
  std::vector<Token> Take(int seq);
  // One sequence alone: Ask + DraftAsked + Take.
  std::vector<Token> Draft(int seq, const std::vector<Token>& history, Token last, int n_max);

  // How many of the last draft the target kept (some drafters learn from it).
  void Accept(int seq, int n_accepted);
  // The same when only the first `used` tokens of the draft Take gave went
  // into the target's batch (the scheduler trims a draft to what pays).
  // used 0 tells the drafter nothing. A trimmed draft kept whole counts as
  // kept whole: llama.cpp's ngram-mod measures acceptance against the length
  // it proposed and clears its n-gram pool after five drafts kept under a
  // quarter, which every trimmed draft would otherwise look like.
  void Accept(int seq, int used, int kept);

  static constexpr int kCatchUpPerStep = 256;

 private:
  struct Asked {
    bool asked = false;
    const std::vector<Token>* history = nullptr;  // what the target's KV holds
    Token last = 0;
    int n_max = 0;
    std::vector<Token> out;
  };
  Drafter() = default;
  // Brings the draft model's KV of each asked sequence to its history;
  // a sequence still behind is not drafted this time.
  void CatchUpDraftModel();
  // Records what the draft model's KV holds after drafting.
  void NoteDraftModelKv(int seq);

  std::string mode_;
  common_speculative* spec_ = nullptr;
  std::unique_ptr<Session> draft_;            // null for n-gram modes
  std::vector<Asked> asked_;                  // per sequence
  std::vector<bool> drafted_;                 // per sequence: a draft is out, awaiting Accept
  std::vector<int> proposed_;                 // per sequence: the length of that draft
  std::vector<std::vector<Token>> draft_kv_;  // per sequence: the draft model's KV tokens
};

// Why `draft` cannot draft for `target`: "" when their vocabularies are the
// same (type, size, special tokens and every token's text).
std::string VocabularyMismatch(const Model& target, const Model& draft);

}  // namespace hone::engine
