// Single-sequence text generation: prefill the prompt in n_batch chunks, then
// decode one token at a time, streaming valid UTF-8 to a callback.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/drafter.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "engine/tokenizer.h"
#include "util/result.h"

namespace hone::engine {

enum class StopReason { kMaxTokens, kEndOfGeneration, kStopString, kCancelled, kContextFull };
const char* StopReasonName(StopReason r);

struct GenerateRequest {
  std::vector<Token> prompt;
  int max_tokens = 128;  // < 0: until end of generation or context full
  SamplingOptions sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;        // benchmarks: always produce max_tokens
  int seq = 0;                    // sequence id in the session
  // Speculative decoding: drafts after each sampled token are decoded with
  // it and kept while the sampler agrees, so the output is the same tokens
  // (greedy) or the same distribution. Null: one token per decode.
  Drafter* drafter = nullptr;
  int spec_max = 64;  // most drafts per step; the length adapts to acceptance
};

struct GenerateResult {
  std::string text;           // everything streamed, valid UTF-8
  std::vector<Token> tokens;  // generated tokens
  StopReason stop_reason = StopReason::kMaxTokens;
  int n_prompt = 0;
  double prompt_seconds = 0;  // prefill
  double ttft_seconds = 0;    // prefill + first sampled token
  double gen_seconds = 0;     // decode of tokens after the first
  int draft_tokens = 0;       // drafted and decoded (speculation)
  int accepted_tokens = 0;    // of those, kept
  double prompt_tps() const { return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0; }
  // Decode speed over the tokens after the first (the first rides on prefill).
  double gen_tps() const {
    return gen_seconds > 0 && tokens.size() > 1 ? (tokens.size() - 1) / gen_seconds : 0;
  }
};

// Called with each new piece of text; return false to stop (kCancelled).
using TextCallback = std::function<bool(std::string_view text)>;

// Errors: kInvalidArgument (empty prompt, prompt longer than the context),
// kInternal (llama_decode failed).
Result<GenerateResult> Generate(Session& session, const GenerateRequest& request,
                                const TextCallback& on_text = {});

// Feeds tokens into a sequence's KV cache in n_batch chunks starting at
// position `pos`, with logits for the last one only.
Status Prefill(Session& session, int seq, const std::vector<Token>& tokens, int pos);

}  // namespace hone::engine
