#include "engine/generator.h"

#include <llama.h>

#include <algorithm>
#include <chrono>

#include "engine/utf8.h"

namespace hone::engine {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Status DecodeError(int rc) {
  if (rc == 1)
    return MakeError(ErrorCode::kOutOfMemory, "no KV cache space left for the batch (context full)");
  if (rc == 2) return MakeError(ErrorCode::kAborted, "decode aborted");
  return MakeError(ErrorCode::kInternal, "llama_decode failed with code " + std::to_string(rc));
}

}  // namespace

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kEndOfGeneration:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kContextFull:
      return "context_full";
  }
  return "?";
}

Status Prefill(Session& session, int seq, const std::vector<Token>& tokens, int pos) {
  const int n_batch = static_cast<int>(session.n_batch());
  llama_batch batch = llama_batch_init(n_batch, 0, 1);
  Status status;
  for (size_t start = 0; start < tokens.size(); start += n_batch) {
    int n = static_cast<int>(std::min<size_t>(n_batch, tokens.size() - start));
    batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tokens[start + i];
      batch.pos[i] = pos + static_cast<int>(start) + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = seq;
      batch.logits[i] = (start + i == tokens.size() - 1);
    }
    int rc = session.Decode(batch);
    if (rc != 0) {
      status = DecodeError(rc);
      break;
    }
  }
  llama_batch_free(batch);
  return status;
}

namespace {

// Decodes each sampled token, and with a drafter the drafts after it in the
// same batch; then says where the next token's logits are. A draft equal to
// the token sampled before it is kept (its logits are already there); at the
// first that differs the rest are cut from the KV.
class DecodeSteps {
 public:
  DecodeSteps(Session& session, const GenerateRequest& req, GenerateResult* out)
      : session_(session),
        req_(req),
        out_(out),
        kv_(req.prompt),
        batch_(llama_batch_init(req.spec_max + 1, 0, 1)) {}
  ~DecodeSteps() { llama_batch_free(batch_); }
  DecodeSteps(const DecodeSteps&) = delete;
  DecodeSteps& operator=(const DecodeSteps&) = delete;

  // `t` was just sampled; `left`: tokens the answer may still take after
  // it. Returns the output index to sample next, or an error (rc 2: abort).
  Result<int> Advance(Token t, int left, int n_ctx) {
    if (kept_ < drafts_.size() && t == drafts_[kept_]) {
      ++kept_;
      ++out_->accepted_tokens;
      return static_cast<int>(kept_);  // logits after the kept draft
    }
    if (!drafts_.empty()) {  // cut what was not kept
      kv_.resize(kv_.size() - (drafts_.size() - kept_));
      session_.TruncateSequence(req_.seq, static_cast<int>(kv_.size()));
      req_.drafter->Accept(req_.seq, static_cast<int>(drafts_.size()), static_cast<int>(kept_));
      Adapt();
    }
    drafts_.clear();
    kept_ = 0;
    // Next and the drafts go in one batch: llama.cpp aborts on more than n_batch.
    const int room = std::min(
        {left - 1, n_ctx - static_cast<int>(kv_.size()) - 2, static_cast<int>(session_.n_batch()) - 1});
    if (req_.drafter && room > 0) drafts_ = req_.drafter->Draft(req_.seq, kv_, t, std::min(spec_len_, room));
    batch_.n_tokens = 0;
    Add(t);
    for (Token d : drafts_) Add(d);
    out_->draft_tokens += static_cast<int>(drafts_.size());
    if (int rc = session_.Decode(batch_); rc != 0) return DecodeError(rc).error();
    return 0;
  }

 private:
  void Add(Token t) {
    const int i = batch_.n_tokens++;
    batch_.token[i] = t;
    batch_.pos[i] = static_cast<llama_pos>(kv_.size());
    batch_.n_seq_id[i] = 1;
    batch_.seq_id[i][0] = req_.seq;
    batch_.logits[i] = 1;
    kv_.push_back(t);
  }
  // The draft length doubles while every draft is kept, halves when fewer than half are.
  void Adapt() {
    if (kept_ == drafts_.size())
      spec_len_ = std::min(spec_len_ * 2, req_.spec_max);
    else if (kept_ * 2 < drafts_.size())
      spec_len_ = std::max(1, spec_len_ / 2);
  }

  Session& session_;
  const GenerateRequest& req_;
  GenerateResult* out_;
  std::vector<Token> kv_;      // the sequence's KV: prompt, kept tokens, this step's drafts
  std::vector<Token> drafts_;  // decoded after the last sampled token
  size_t kept_ = 0;            // of drafts_, verified so far
  int spec_len_ = 4;
  llama_batch batch_;
};

}  // namespace

Result<GenerateResult> Generate(Session& session, const GenerateRequest& req, const TextCallback& on_text) {
  if (req.prompt.empty()) return MakeError(ErrorCode::kInvalidArgument, "the prompt is empty");
  const int n_ctx = static_cast<int>(session.n_ctx() / std::max<uint32_t>(1, session.options().n_seq_max));
  if (static_cast<int>(req.prompt.size()) >= n_ctx) {
    return MakeError(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(req.prompt.size()) +
                                                      " tokens but the context holds " +
                                                      std::to_string(n_ctx));
  }
  auto sampler = Sampler::Create(session.model(), req.sampling);
  if (!sampler) return sampler.error();
  Tokenizer tok(session.model());

  GenerateResult out;
  out.n_prompt = static_cast<int>(req.prompt.size());
  session.ClearSequence(req.seq);
  for (Token t : req.prompt) (*sampler)->Accept(t);  // so repetition penalties see the prompt
  if (req.drafter) req.drafter->Begin(req.seq, req.prompt);

  auto t0 = Clock::now();
  if (Status s = Prefill(session, req.seq, req.prompt, 0); !s) return s.error();
  out.prompt_seconds = Since(t0);

  Utf8Stream utf8;
  StopMatcher stops(req.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return true;
    out.text += text;
    return on_text ? on_text(text) : true;
  };

  DecodeSteps steps(session, req, &out);
  int logits_index = -1;  // last output of the prefill batch
  Clock::time_point gen_start;
  for (int i = 0; req.max_tokens < 0 || i < req.max_tokens; ++i) {
    Token t = (*sampler)->Sample(session, logits_index);
    if (i == 0) {
      out.ttft_seconds = Since(t0);
      gen_start = Clock::now();
    }
    if (!req.ignore_eos && tok.IsEndOfGeneration(t)) {
      out.stop_reason = StopReason::kEndOfGeneration;
      break;
    }
    out.tokens.push_back(t);
    std::string text = stops.Push(utf8.Push(tok.Piece(t)));
    if (!emit(text)) {
      out.stop_reason = StopReason::kCancelled;
      break;
    }
    if (stops.stopped()) {
      out.stop_reason = StopReason::kStopString;
      break;
    }
    if (req.max_tokens >= 0 && i + 1 >= req.max_tokens) break;
    if (out.n_prompt + i >= n_ctx) {
      out.stop_reason = StopReason::kContextFull;
      break;
    }
    const int left = req.max_tokens < 0 ? n_ctx : req.max_tokens - i - 1;
    auto next = steps.Advance(t, left, n_ctx);
    if (!next) {
      if (next.error().code != ErrorCode::kAborted) return next.error();
      out.stop_reason = StopReason::kCancelled;
      return out;
    }
    logits_index = *next;
  }
  if (!out.tokens.empty()) out.gen_seconds = Since(gen_start);
  // Flush what was held back; a held partial character becomes U+FFFD.
  if (out.stop_reason != StopReason::kStopString && out.stop_reason != StopReason::kCancelled) {
    emit(stops.Push(utf8.Flush()) + stops.Flush());
  }
  return out;
}

}  // namespace hone::engine
