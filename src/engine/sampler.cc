#include "engine/sampler.h"

#include <llama.h>

#include <algorithm>
#include <cmath>

#include "engine/backend.h"

namespace hone::engine {

struct Sampler::Candidates {
  std::vector<llama_token_data> data;
};

Result<std::unique_ptr<Sampler>> Sampler::Create(const Model& model, const SamplingOptions& o) {
  if (o.top_p < 0 || o.min_p < 0 || o.min_p > 1) {
    return MakeError(ErrorCode::kInvalidArgument, "top_p must be >= 0 and min_p within [0, 1]");
  }
  if (o.repeat_penalty <= 0) return MakeError(ErrorCode::kInvalidArgument, "repeat penalty must be > 0");
  for (float v : {o.temperature, o.top_p, o.min_p, o.repeat_penalty, o.presence_penalty, o.frequency_penalty}) {
    if (!std::isfinite(v)) return MakeError(ErrorCode::kInvalidArgument, "sampling values must be finite numbers");
  }
  std::unique_ptr<Sampler> s(new Sampler());
  llama_sampler_chain_params cp = llama_sampler_chain_default_params();
  cp.no_perf = true;
  s->chain_ = llama_sampler_chain_init(cp);
  const llama_vocab* vocab = model.vocab();
  if (!o.grammar.empty()) {
    TakeRecentLlamaErrors();
    llama_sampler* g = nullptr;
    if (o.grammar_lazy) {
      std::vector<const char*> patterns;
      for (const auto& p : o.grammar_trigger_patterns) patterns.push_back(p.c_str());
      g = llama_sampler_init_grammar_lazy_patterns(vocab, o.grammar.c_str(), "root", patterns.data(),
                                                   patterns.size(), o.grammar_trigger_tokens.data(),
                                                   o.grammar_trigger_tokens.size());
    } else {
      g = llama_sampler_init_grammar(vocab, o.grammar.c_str(), "root");
    }
    if (!g) {
      return MakeError(ErrorCode::kInvalidArgument, "grammar does not parse: " + TakeRecentLlamaErrors());
    }
    // llama.cpp's grammar throws when a token does not fit it.
    try {
      for (Token t : o.grammar_prefill) llama_sampler_accept(g, t);
    } catch (const std::exception& e) {
      llama_sampler_free(g);
      return MakeError(ErrorCode::kInternal,
                       std::string("the grammar refuses the answer's start: ") + e.what());
    }
    llama_sampler_chain_add(s->chain_, g);
  }
  if (o.repeat_penalty != 1.0f || o.presence_penalty != 0 || o.frequency_penalty != 0) {
    llama_sampler_chain_add(
        s->chain_, llama_sampler_init_penalties(llama_vocab_n_tokens(vocab), o.repeat_last_n,
                                                o.repeat_penalty, o.frequency_penalty, o.presence_penalty));
  }
  s->n_vocab_ = llama_vocab_n_tokens(vocab);
  s->top_ = std::make_unique<Candidates>();
  // Nothing in the chain before top-k (or greedy) looks at all tokens: the shortcut applies.
  const bool plain = o.grammar.empty() && llama_sampler_chain_n(s->chain_) == 0 && !o.full_vocab;
  if (o.greedy()) {
    llama_sampler_chain_add(s->chain_, llama_sampler_init_greedy());
    if (plain) s->prefilter_k_ = 1;
    return s;
  }
  if (plain && o.top_k > 0) s->prefilter_k_ = std::min(o.top_k, s->n_vocab_);
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
  if (prefilter_k_ <= 0) {
    // llama_sampler_sample also calls accept on the chosen token.
    return llama_sampler_sample(chain_, session.raw(), index);
  }
  const float* logits = llama_get_logits_ith(session.raw(), index);
  // The k largest logits in one pass: a min-heap whose root is the smallest kept.
  std::vector<llama_token_data>& top = top_->data;
  top.clear();
  auto smaller_first = [](const llama_token_data& a, const llama_token_data& b) { return a.logit > b.logit; };
  for (int i = 0; i < n_vocab_; ++i) {
    const float l = logits[i];
    if (static_cast<int>(top.size()) < prefilter_k_) {
      top.push_back({i, l, 0.0f});
      if (static_cast<int>(top.size()) == prefilter_k_) std::make_heap(top.begin(), top.end(), smaller_first);
    } else if (l > top.front().logit) {
      std::pop_heap(top.begin(), top.end(), smaller_first);
      top.back() = {i, l, 0.0f};
      std::push_heap(top.begin(), top.end(), smaller_first);
    }
  }
  // Vocabulary order, as the full array has it, so ties break the same way.
  std::sort(top.begin(), top.end(),
            [](const llama_token_data& a, const llama_token_data& b) { return a.id < b.id; });
  llama_token_data_array arr{top.data(), top.size(), -1, false};
  llama_sampler_apply(chain_, &arr);
  const Token t = arr.data[arr.selected].id;
  llama_sampler_accept(chain_, t);
  return t;
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
    if (at != std::string::npos && at < first) first = at, matched_ = s;
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
