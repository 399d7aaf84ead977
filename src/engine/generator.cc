#include "engine/generator.h"

#include <llama.h>

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
    int rc = llama_decode(session.raw(), batch);
    if (rc != 0) {
      status = DecodeError(rc);
      break;
    }
  }
  llama_batch_free(batch);
  return status;
}

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

  llama_batch batch = llama_batch_init(1, 0, 1);
  int pos = out.n_prompt;
  int logits_index = -1;  // last output of the prefill batch
  Clock::time_point gen_start;
  bool keep_going = true;
  for (int i = 0; keep_going && (req.max_tokens < 0 || i < req.max_tokens); ++i) {
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
    if (pos >= n_ctx) {
      out.stop_reason = StopReason::kContextFull;
      break;
    }
    batch.n_tokens = 1;
    batch.token[0] = t;
    batch.pos[0] = pos++;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = req.seq;
    batch.logits[0] = 1;
    if (int rc = llama_decode(session.raw(), batch); rc != 0) {
      llama_batch_free(batch);
      if (rc == 2) {
        out.stop_reason = StopReason::kCancelled;
        return out;
      }
      return DecodeError(rc).error();
    }
    logits_index = 0;
  }
  llama_batch_free(batch);
  if (!out.tokens.empty()) out.gen_seconds = Since(gen_start);
  // Flush what was held back; a held partial character becomes U+FFFD.
  if (out.stop_reason != StopReason::kStopString && out.stop_reason != StopReason::kCancelled) {
    emit(stops.Push(utf8.Flush()) + stops.Flush());
  }
  return out;
}

}  // namespace hone::engine
