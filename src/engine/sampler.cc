#include "engine/sampler.h"

#include <llama.h>

#include <algorithm>

#include "engine/backend.h"

namespace hone::engine {

Result<std::unique_ptr<Sampler>> Sampler::Create(const Model& model, const SamplingOptions& o) {
  if (o.top_p < 0 || o.min_p < 0 || o.min_p > 1) {
    return MakeError(ErrorCode::kInvalidArgument, "top_p must be >= 0 and min_p within [0, 1]");
  }
  if (o.repeat_penalty <= 0) return MakeError(ErrorCode::kInvalidArgument, "repeat penalty must be > 0");
  std::unique_ptr<Sampler> s(new Sampler());
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  s->chain_ = llama_sampler_chain_init(cp);
  const llama_vocab* vocab = model.vocab();
  if (!o.grammar.empty()) {
    TakeRecentLlamaErrors();
    llama_sampler* g = llama_sampler_init_grammar(vocab, o.grammar.c_str(), "root");
    if (!g) {
      return MakeError(ErrorCode::kInvalidArgument, "grammar does not parse: " + TakeRecentLlamaErrors());
    }
    llama_sampler_chain_add(s->chain_, g);
  }
  if (o.repeat_penalty != 1.0f || o.presence_penalty != 0 || o.frequency_penalty != 0) {
    llama_sampler_chain_add(
        s->chain_, llama_sampler_init_penalties(llama_vocab_n_tokens(vocab), o.repeat_last_n,
                                                o.repeat_penalty, o.frequency_penalty, o.presence_penalty));
  }
  if (o.greedy()) {
    llama_sampler_chain_add(s->chain_, llama_sampler_init_greedy());
    return s;
  }
  if (o.top_k > 0) llama_sampler_chain_add(s->chain_, llama_sampler_init_top_k(o.top_k));
  if (o.top_p < 1.0f) llama_sampler_chain_add(s->chain_, llama_sampler_init_top_p(o.top_p, 1));
  if (o.min_p > 0) llama_sampler_chain_add(s->chain_, llama_sampler_init_min_p(o.min_p, 1));
  llama_sampler_chain_add(s->chain_, llama_sampler_init_temp(o.temperature));
  llama_sampler_chain_add(s->chain_, llama_sampler_init_dist(o.seed));
  return s;
}

Sampler::~Sampler() {
  if (chain_) llama_sampler_free(chain_);
}

Token Sampler::Sample(Session& session, int index) {
  // llama_sampler_sample also calls accept on the chosen token.
  return llama_sampler_sample(chain_, session.raw(), index);
}

void Sampler::Accept(Token token) { llama_sampler_accept(chain_, token); }
void Sampler::Reset() { llama_sampler_reset(chain_); }

std::string StopMatcher::Push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  if (stops_.empty()) {
    std::string out;
    out.swap(held_);
    return out;
  }
  // A full match anywhere: emit what precedes the earliest one, then stop.
  size_t first = std::string::npos;
  for (auto& s : stops_) {
    if (s.empty()) continue;
    size_t at = held_.find(s);
    if (at != std::string::npos) first = std::min(first, at);
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a prefix of some stop string.
  size_t keep = 0;
  for (auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace hone::engine
