#include "engine/batch_decoder.h"

#include <llama.h>

#include <chrono>
#include <memory>

#include "engine/utf8.h"

namespace hone::engine {

BatchDecoder::BatchDecoder(Session& session, int capacity)
    : session_(session), capacity_(capacity), batch_(new llama_batch(llama_batch_init(capacity, 0, 1))) {
  batch_->n_tokens = 0;
}

BatchDecoder::~BatchDecoder() {
  llama_batch_free(*batch_);
  delete batch_;
}

int BatchDecoder::size() const { return batch_->n_tokens; }

int BatchDecoder::Add(int seq, Token token, int pos, bool want_logits) {
  if (full()) return -2;
  int i = batch_->n_tokens++;
  batch_->token[i] = token;
  batch_->pos[i] = pos;
  batch_->n_seq_id[i] = 1;
  batch_->seq_id[i][0] = seq;
  batch_->logits[i] = want_logits;
  // llama.cpp indexes outputs by batch position (llama_get_logits_ith(i)).
  return want_logits ? i : -1;
}

Status BatchDecoder::Decode() {
  if (batch_->n_tokens == 0) return Status::Ok();
  int rc = session_.Decode(*batch_);
  batch_->n_tokens = 0;
  if (rc == 0) return Status::Ok();
  if (rc == 1) return MakeError(ErrorCode::kOutOfMemory, "no KV cache space left for the batch");
  if (rc == 2) return MakeError(ErrorCode::kAborted, "decode aborted");
  return MakeError(ErrorCode::kInternal, "llama_decode failed with code " + std::to_string(rc));
}

Result<std::vector<GenerateResult>> GenerateParallel(Session& session,
                                                     const std::vector<GenerateRequest>& reqs) {
  const int n = static_cast<int>(reqs.size());
  if (n > static_cast<int>(session.options().n_seq_max)) {
    return MakeError(ErrorCode::kInvalidArgument, "more requests than the session's parallel sequences");
  }
  Tokenizer tok(session.model());
  struct Seq {
    std::unique_ptr<Sampler> sampler;
    Utf8Stream utf8;
    std::unique_ptr<StopMatcher> stops;
    int pos = 0;
    int logits_index = -1;
    bool done = false;
  };
  std::vector<Seq> seqs(n);
  std::vector<GenerateResult> out(n);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    if (reqs[i].prompt.empty()) return MakeError(ErrorCode::kInvalidArgument, "request has an empty prompt");
    auto s = Sampler::Create(session.model(), reqs[i].sampling);
    if (!s) return s.error();
    seqs[i].sampler = std::move(*s);
    seqs[i].stops = std::make_unique<StopMatcher>(reqs[i].stop);
    session.ClearSequence(i);
    // Prompts go in one by one; the server's scheduler mixes them into decode steps.
    if (Status st = Prefill(session, i, reqs[i].prompt, 0); !st) return st.error();
    seqs[i].pos = static_cast<int>(reqs[i].prompt.size());
    out[i].n_prompt = seqs[i].pos;
    // Keep this sequence's last logits: sample now, before the next prefill overwrites them.
    Token t = seqs[i].sampler->Sample(session, -1);
    out[i].tokens.push_back(t);
    out[i].ttft_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  BatchDecoder batch(session, n);
  for (;;) {
    int active = 0;
    for (int i = 0; i < n; ++i) {
      Seq& s = seqs[i];
      if (s.done) continue;
      Token t = out[i].tokens.back();
      if (!reqs[i].ignore_eos && tok.IsEndOfGeneration(t)) {
        out[i].tokens.pop_back();
        out[i].stop_reason = StopReason::kEndOfGeneration;
        s.done = true;
        continue;
      }
      out[i].text += s.stops->Push(s.utf8.Push(tok.Piece(t)));
      if (s.stops->stopped()) {
        out[i].stop_reason = StopReason::kStopString;
        s.done = true;
        continue;
      }
      if (reqs[i].max_tokens >= 0 && static_cast<int>(out[i].tokens.size()) >= reqs[i].max_tokens) {
        out[i].stop_reason = StopReason::kMaxTokens;
        s.done = true;
        continue;
      }
      s.logits_index = batch.Add(i, t, s.pos++, true);
      ++active;
    }
    if (active == 0) break;
    if (Status st = batch.Decode(); !st) return st.error();
    for (int i = 0; i < n; ++i) {
      if (!seqs[i].done) out[i].tokens.push_back(seqs[i].sampler->Sample(session, seqs[i].logits_index));
    }
  }
  for (int i = 0; i < n; ++i) {
    if (out[i].stop_reason != StopReason::kStopString)
      out[i].text += seqs[i].stops->Push(seqs[i].utf8.Flush());
    out[i].text += seqs[i].stops->Flush();
    out[i].gen_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return out;
}

}  // namespace hone::engine
