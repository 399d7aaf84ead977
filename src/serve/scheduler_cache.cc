// The scheduler's side of the prompt cache: which prefix a slot may reuse,
// when restoring from the cache beats prefilling, and keeping a slot's
// tokens before another prompt overwrites them. Scheduler thread only,
// except where a function says otherwise.
#include <cstdio>

#include "serve/scheduler.h"
#include "serve/scheduler_slot.h"

namespace hone::serve {
namespace {

// Below this many tokens gained over what a slot already offers, a restore
// (a copy of the whole entry) is not worth its fixed costs.
constexpr size_t kMinRestoreGain = 16;

}  // namespace

// A prefix is reused only within one scope: a tenant never finds (nor times)
// another tenant's tokens in a slot, beyond a declared shared system prompt.
size_t Scheduler::SharedPrefix(const Slot& s, const Job& job) const {
  const size_t common = CommonPrefix(s.cached, job.prompt);
  if (s.scope == job.cache_scope) return common;
  return shared_.Reusable(job.prompt, common);
}

void Scheduler::ShareSystemPrefix(std::vector<engine::Token> prefix) {
  shared_.Add(prefix);
  if (cache_ && cache_->Covers(kSharedScope, prefix)) return;  // warmed before a restart
  engine::SamplingOptions greedy;
  greedy.temperature = 0;
  const size_t n = prefix.size();
  auto job = std::make_shared<Job>(std::move(prefix), /*max_tokens=*/1, greedy, std::vector<std::string>{},
                                   Clock::now() + std::chrono::minutes(10), std::vector<engine::Token>{},
                                   kSharedScope);
  auto queued = Submit(job);
  if (!queued || *queued != SubmitResult::kOk) {
    std::fprintf(stderr, "hone serve: %s: a shared system prompt of %zu tokens was not warmed: %s\n",
                 name_.c_str(), n, queued ? "the queue is full" : queued.error().message.c_str());
    return;
  }
  std::fprintf(stderr, "hone serve: %s: warming a shared system prompt of %zu tokens\n", name_.c_str(), n);
}

// The longest prefix of a prompt in the cache: its own scope's, or
// a declared shared prefix (which any scope may restore).
CacheMatch Scheduler::FindCached(const std::string& scope, const std::vector<engine::Token>& prompt) const {
  if (!cache_) return {};
  CacheMatch m = cache_->Find(scope, prompt);
  if (shared_.empty()) return m;
  CacheMatch s = cache_->Find(kSharedScope, prompt);
  // Only warmed prefixes live in the shared scope; the cap is for safety.
  s.tokens = shared_.Reusable(prompt, s.tokens);
  return s.tokens > m.tokens ? s : m;
}

CacheMatch Scheduler::WorthRestoring(const Job& job, size_t have) {
  if (!cache_) return {};
  const CacheMatch m = FindCached(job.cache_scope, job.prompt);
  // The last prompt token is decoded again for its logits, as after a slot hit.
  const size_t usable = std::min(m.tokens, job.prompt.size() - 1);
  if (m.tier == CacheTier::kNone || usable < have + kMinRestoreGain) {
    if (have == 0) metrics_->Add("hone_prompt_cache_misses_total", name_);
    return {};
  }
  const double prefill_s_per_token = forecaster_.prefill_s_per_token();
  // Restoring costs the whole entry; prefilling costs only what it adds.
  const double restore_s = m.entry_tokens * cache_->RestoreSecondsPerToken(m.tier);
  if (restore_s >= (usable - have) * prefill_s_per_token) return {};
  return m;
}

bool Scheduler::RestoreFromCache(Slot& s, const CacheMatch& m, const std::vector<uint8_t>& state,
                                 CacheTier served) {
  const auto t0 = Clock::now();
  // Every position from 0 must be back: a state without its first cells
  // (a sliding window's) would be attended as if they were there.
  const bool ok =
      session_->RestoreSequence(s.id, state.data(), state.size()) && session_->SequenceStart(s.id) == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "hone serve: %s: llama.cpp refused a cached state of %zu tokens; prefilling instead\n",
                 name_.c_str(), m.entry_tokens);
    cache_->Drop(m.id);  // it would be refused again, and cost a read each time
    session_->ClearSequence(s.id);
    s.cached.clear();
    return false;
  }
  const auto& prompt = s.job->prompt;
  s.cached.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(m.tokens));
  // The entry may run past the shared prefix; Admit cuts it back there.
  s.cached.resize(m.tokens);
  cache_->RecordRestore(served, m.entry_tokens, std::chrono::duration<double>(Clock::now() - t0).count());
  return true;
}

void Scheduler::SaveSlot(Slot& s) {
  if (!cache_ || s.cached.size() < cache_->options().min_tokens) return;
  if (cache_->Covers(s.scope, s.cached)) return;  // no KV copy for what is held already
  // The KV must hold exactly the tokens we think it does: a state saved
  // against the wrong tokens would be restored as a wrong answer later.
  if (session_->SequenceLength(s.id) != static_cast<int>(s.cached.size())) return;
  auto state = session_->SaveSequence(s.id);
  if (state.empty()) return;
  cache_->Put(s.scope, s.cached, std::move(state));
}

}  // namespace hone::serve
