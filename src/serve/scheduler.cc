#include "serve/scheduler.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/tokenizer.h"
#include "serve/scheduler_slot.h"

namespace hone::serve {

Scheduler::Scheduler(std::shared_ptr<engine::Model> model, const SchedulerOptions& opt, Metrics* metrics,
                     std::string name)
    : model_(std::move(model)), opt_(opt), metrics_(metrics), name_(std::move(name)) {}

namespace {

// The drafter for --spec, with the draft model's own context: the target's
// run parameters and one sequence per slot, each as long as a slot's.
Result<std::unique_ptr<engine::Drafter>> CreateDrafter(const SchedulerOptions& opt,
                                                       const engine::SessionOptions& target_options,
                                                       const engine::Session& target) {
  engine::DrafterOptions d;
  d.mode = opt.spec;
  d.n_seq = opt.slots;
  d.ngram = opt.spec_ngram;
  d.max_draft = opt.spec_max;
  d.target = &target;
  if (opt.draft_model) {
    engine::SessionOptions so = target_options;
    so.kv_type_k = so.kv_type_v = "f16";
    auto session = engine::Session::Create(opt.draft_model, so);
    if (!session) return MakeError(session.error().code, "the draft model: " + session.error().message);
    d.draft_session = std::move(*session);
  }
  return engine::Drafter::Create(std::move(d));
}

bool Drafts(const SchedulerOptions& opt) {
  return (opt.spec != "none" && !opt.spec.empty()) || opt.draft_model;
}
}  // namespace

Result<std::unique_ptr<Scheduler>> Scheduler::Create(std::shared_ptr<engine::Model> model,
                                                     const SchedulerOptions& in, Metrics* metrics,
                                                     std::string model_name) {
  SchedulerOptions opt = in;
  if (opt.slots < 1 || opt.slots > 256) return MakeError(ErrorCode::kInvalidArgument, "slots must be 1..256");
  if (opt.ctx_per_slot < 16) return MakeError(ErrorCode::kInvalidArgument, "context per slot must be >= 16");
  // llama.cpp pads each sequence's context to 256 cells; match it so our limit is real.
  opt.ctx_per_slot = (opt.ctx_per_slot + 255) / 256 * 256;
  opt.batch = std::max(opt.batch, opt.slots);
  opt.prefill_chunk = std::clamp(opt.prefill_chunk, 1, opt.batch);
  engine::SessionOptions so = opt.tuned.value_or(engine::SessionOptions{});
  if (!opt.tuned) {
    so.threads = opt.threads;
    so.flash_attn = opt.flash_attn;
    so.kv_type_k = so.kv_type_v = opt.kv_type;
    so.n_ubatch = static_cast<uint32_t>(opt.batch);
  }
  so.n_ctx = static_cast<uint32_t>(opt.ctx_per_slot * opt.slots);
  so.n_seq_max = static_cast<uint32_t>(opt.slots);
  so.kv_unified = UsesSharedKv(opt);
  so.n_batch = static_cast<uint32_t>(opt.batch);
  so.n_ubatch = std::min<uint32_t>(so.n_ubatch, so.n_batch);
  so.memory_budget_bytes = opt.memory_budget_bytes;
  auto session = engine::Session::Create(model, so);
  if (!session) return session.error();
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(model), opt, metrics, std::move(model_name)));
  s->session_ = std::move(*session);
  s->batch_ = std::make_unique<engine::BatchDecoder>(*s->session_, opt.batch);
  for (int i = 0; i < opt.slots; ++i) {
    s->slots_.push_back(std::make_unique<Slot>());
    s->slots_.back()->id = i;
  }
  if (metrics) {  // one KV cell holds one token; prefix reuse works per cell
    metrics->SetInfo(metric::kCacheConfig, s->name_,
                     {{"block_size", "1"},
                      {"num_gpu_blocks", std::to_string(opt.ctx_per_slot * opt.slots)},
                      {"slots", std::to_string(opt.slots)}});
  }
  // A sliding-window model's saved state lacks the cells its window masked,
  // so a restore cut back to a shorter prefix would attend without them.
  if ((opt.cache.ram_bytes > 0 || opt.cache.disk_bytes > 0) && s->model_->info().n_swa > 0) {
    std::fprintf(stderr, "hone serve: %s: sliding-window attention; no prompt cache beyond the slots\n",
                 s->name_.c_str());
  } else if (opt.cache.ram_bytes > 0 || opt.cache.disk_bytes > 0) {
    s->cache_ = std::make_unique<PromptCache>(opt.cache, metrics, s->name_);
  }
  if (Drafts(opt)) {
    auto drafter = CreateDrafter(opt, so, *s->session_);
    if (!drafter) return drafter.error();
    s->drafter_ = std::move(*drafter);
  }
  s->OpenStepTrace();
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // What the slots hold goes to the prompt cache, whose disk tier keeps it
  // for the next load of this model (a reload, a restart).
  if (cache_) {
    for (auto& sl : slots_) SaveSlot(*sl);
    cache_.reset();  // writes what is queued
  }
  JobResult r;
  r.finish = Finish::kCancelled;
  r.error = "the model was unloaded";
  for (auto& p : queue_) p.job->Finish(r);
  if (step_trace_) std::fclose(step_trace_);
}

int Scheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

// max_queue counts requests that must wait: those a free slot will take at
// the next step do not (so max_queue 0 means "only what the slots hold").
// Places held by requests still preparing count as taken. Needs mu_.
int Scheduler::RoomLocked() const {
  const int free_slots = std::max(0, opt_.slots - active_.load());
  return opt_.max_queue + free_slots - static_cast<int>(queue_.size()) - places_held_;
}

bool Scheduler::QueueFull() const {
  std::lock_guard<std::mutex> lock(mu_);
  return RoomLocked() <= 0;
}

QueuePlace Scheduler::HoldPlace() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || RoomLocked() <= 0) return QueuePlace();
  ++places_held_;
  return QueuePlace(this);
}

QueuePlace& QueuePlace::operator=(QueuePlace&& o) noexcept {
  if (this != &o) {
    this->~QueuePlace();
    sched_ = std::exchange(o.sched_, nullptr);
  }
  return *this;
}

QueuePlace::~QueuePlace() {
  if (!sched_) return;
  std::lock_guard<std::mutex> lock(sched_->mu_);
  --sched_->places_held_;
}

Result<SubmitResult> Scheduler::Submit(std::shared_ptr<Job> job, QueuePlace* place) {
  if (place && place->sched_ != this) place = nullptr;  // an empty place, or another model's
  if (job->prompt.empty()) return MakeError(ErrorCode::kInvalidArgument, "the prompt is empty");
  if (static_cast<int>(job->prompt.size()) >= opt_.ctx_per_slot) {
    return MakeError(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(job->prompt.size()) +
                                                      " tokens but the context holds " +
                                                      std::to_string(opt_.ctx_per_slot));
  }
  // Bounds llama.cpp would not check: a penalty window allocates its length.
  if (job->max_tokens > opt_.ctx_per_slot) {
    return MakeError(ErrorCode::kInvalidArgument, "'max_tokens' " + std::to_string(job->max_tokens) +
                                                      " is more than the context of " +
                                                      std::to_string(opt_.ctx_per_slot) + " tokens");
  }
  if (job->sampling.repeat_last_n < -1 || job->sampling.repeat_last_n > opt_.ctx_per_slot) {
    return MakeError(ErrorCode::kInvalidArgument, "'repeat_last_n' must be within [-1, " +
                                                      std::to_string(opt_.ctx_per_slot) + "] (the context)");
  }
  if (!place && QueueFull()) return SubmitResult::kQueueFull;  // checked again under the lock below
  auto sampler = engine::Sampler::Create(*model_, job->sampling);
  if (!sampler) return sampler.error();
  // Penalties should see the prompt; a grammar must not (it constrains the output only).
  if (job->sampling.grammar.empty()) {
    for (engine::Token t : job->prompt) (*sampler)->Accept(t);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return SubmitResult::kStopping;
    // The caller's own place is room kept for it.
    if (RoomLocked() + (place ? 1 : 0) <= 0) return SubmitResult::kQueueFull;
    if (place) {
      --places_held_;
      place->sched_ = nullptr;
    }
    queue_.push_back({std::move(job), std::move(*sampler)});
    metrics_->Set(metric::kWaiting, name_, static_cast<double>(queue_.size()));
  }
  cv_.notify_all();
  return SubmitResult::kOk;
}

void Scheduler::Loop() {
  // Before the first decode, so the OpenMP team this thread starts inherits
  // it. Raising one's own niceness needs no privilege; failing is harmless.
  if (opt_.nice > 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), opt_.nice);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || active_.load() > 0; });
      if (stopping_) break;
    }
    // The last barrier: whatever escapes a step fails the requests in it,
    // never the process (and every other model's requests with it).
    try {
      Admit();
      Step();
    } catch (const std::exception& e) {
      for (auto& s : slots_) {
        if (!s->job) continue;
        session_->ClearSequence(s->id);
        s->cached.clear();
        FinishSlot(*s, Finish::kError, std::string("internal error: ") + e.what());
      }
    }
  }
  for (auto& s : slots_) {
    if (s->job) FinishSlot(*s, Finish::kCancelled, "the model was unloaded");
  }
}

namespace {

// Copying another slot's KV costs a pass over its whole stream (with separate
// streams); below this many shared tokens a prefill of them is as cheap.
constexpr size_t kMinPrefixCopy = 32;
// A slot's tokens past the new prompt's prefix go to the prompt cache only
// from this many on: fewer are cheaper to prefill again than to copy out.
constexpr size_t kMinSaveTail = 16;

}  // namespace

// Moves waiting jobs into free slots, reusing the longest cached prefix, from
// the slot itself or copied from another.
void Scheduler::DropAbandoned() {
  std::vector<Pending> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->job->cancelled() || now > it->job->deadline) {
        gone.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (gone.empty()) return;
    metrics_->Set(metric::kWaiting, name_, static_cast<double>(queue_.size()));
  }
  for (Pending& p : gone) {
    JobResult r;
    r.finish = p.job->cancelled() ? Finish::kCancelled : Finish::kTimeout;
    if (r.finish == Finish::kTimeout) r.error = "the request ran past its timeout while it waited for a slot";
    p.job->Finish(r);
  }
}

void Scheduler::Admit() {
  // Before the slots are looked at: a full house must not keep the places
  // of requests nobody waits for.
  DropAbandoned();
  for (;;) {
    Pending p;
    SlotPick pick;
    if (!TakeNext(&p, &pick)) return;
    StartSlot(std::move(p), pick);
  }
}

bool Scheduler::TakeNext(Pending* p, SlotPick* pick) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return false;
  const Job& front = *queue_.front().job;
  for (auto& s : slots_) {
    if (s->job) continue;
    size_t n = SharedPrefix(*s, front);
    if (!pick->best || n > pick->best_common ||
        (n == pick->best_common && s->last_used < pick->best->last_used)) {
      pick->best = s.get();
      pick->best_common = n;
    }
  }
  if (!pick->best) return false;  // all slots busy
  // A shared system prompt often sits in another slot (busy or idle):
  // copying its KV beats prefilling the same tokens again.
  for (auto& s : slots_) {
    if (s.get() == pick->best) continue;
    size_t n = SharedPrefix(*s, front);
    if (n >= pick->best_common + kMinPrefixCopy && n > (pick->donor ? pick->donor_common : 0)) {
      pick->donor = s.get();
      pick->donor_common = n;
    }
  }
  *p = std::move(queue_.front());
  queue_.pop_front();
  // Counted as running in the same critical section as the pop: between
  // the two, RoomLocked would find the job in neither place and admit one
  // request past the bound (the prefix copy below can take milliseconds).
  ++active_;
  metrics_->Set(metric::kWaiting, name_, static_cast<double>(queue_.size()));
  return true;
}

void Scheduler::StartSlot(Pending p, const SlotPick& pick) {
  Slot& s = *pick.best;
  Slot* donor = pick.donor;
  const size_t donor_common = pick.donor_common;
  size_t best_common = pick.best_common;
  // The slot's from here on: if anything below throws, the loop's barrier
  // finishes the job like any other in a slot (and the running count with it).
  s.job = std::move(p.job);
  s.result = JobResult();
  s.stops = std::make_unique<engine::StopMatcher>(s.job->stops);
  s.utf8 = engine::Utf8Stream();
  const auto& prompt = s.job->prompt;
  const CacheMatch from_cache = WorthRestoring(*s.job, donor ? donor_common : best_common);
  // Taken before SaveSlot, whose Put may push the very entry out of RAM.
  CacheTier served = CacheTier::kNone;
  auto state = from_cache.tier != CacheTier::kNone ? cache_->Load(from_cache, &served) : nullptr;
  // Before the slot's KV is replaced or cut: what it holds beyond the new
  // prompt's prefix may be a conversation that comes back (a tail of a few
  // tokens is not worth a copy of the whole sequence).
  if (s.cached.size() >= best_common + kMinSaveTail) SaveSlot(s);
  bool restored = false;
  if (state) {
    restored = RestoreFromCache(s, from_cache, *state, served);
    best_common = restored ? from_cache.tokens : 0;  // a refused restore leaves the slot empty
  }
  if (donor && !restored) {
    // Between separate KV streams llama.cpp copies whole sequences only (in
    // one shared stream the copy just tags the donor's cells with this slot
    // too); the truncation below cuts the copy to the shared prefix.
    session_->ClearSequence(s.id);
    session_->CopySequence(donor->id, s.id, -1, -1);
    s.cached = donor->cached;
    best_common = donor_common;
  }
  s.scope = s.job->cache_scope;
  // The last prompt token must go through decode again to produce logits.
  size_t keep = std::min(best_common, prompt.size() - 1);
  if (!session_->TruncateSequence(s.id, static_cast<int>(keep))) {
    session_->ClearSequence(s.id);
    keep = 0;
  }
  s.cached.resize(keep);
  s.prefilled = keep;
  s.last_job = s.job;
  s.sampler = std::move(p.sampler);
  s.draft.clear();
  s.draft_index.clear();
  s.spec_len = std::min(4, opt_.spec_max);
  s.spec_misses = s.spec_pause = s.spec_idle = 0;
  s.spec_accept = DraftAcceptance(spec_accept_.value());
  if (drafter_) drafter_->Begin(s.id, prompt);
  s.result.prompt_tokens = static_cast<int>(prompt.size());
  s.result.cached_tokens = static_cast<int>(keep);
  s.result.timings.enqueued = s.job->created;
  s.result.timings.started = Clock::now();
  metrics_->Add(metric::kPrefixQueries, name_, static_cast<double>(prompt.size()));
  metrics_->Add(metric::kPrefixHits, name_, static_cast<double>(keep));
  metrics_->Observe(metric::kQueue, name_, s.result.timings.queue_seconds());
}

void Scheduler::Step() {
  // Every exit publishes: a step that ends the last job (a cancel, a
  // timeout) must not leave Forecast counting it as running.
  struct PublishOnExit {
    Scheduler* s;
    ~PublishOnExit() { s->Publish(); }
  } publish{this};
  const auto now = Clock::now();
  int seqs = 0;
  // Drafts may take half of what the slots leave of the batch: every slot's
  // next token and some prefill always fit.
  tokens_this_step_ = 0;
  const auto step_start = Clock::now();  // drafting and sampling count too
  int draft_budget =
      drafter_ && SpecAllowedNow() ? std::max(0, opt_.batch - static_cast<int>(slots_.size())) / 2 : 0;
  // 1. Every generating slot contributes its next token (or ends if cancelled),
  // and with --spec the tokens it drafts after it (all slots drafted at once).
  std::vector<Slot*> decoding;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    s.logits_index = -1;
    s.step_from = s.cached.size();
    if (!s.job) continue;
    if (s.job->cancelled()) {
      FinishSlot(s, Finish::kCancelled);
      continue;
    }
    if (now > s.job->deadline) {
      FinishSlot(s, Finish::kTimeout, "the request ran past its timeout");
      continue;
    }
    if (s.generating()) decoding.push_back(&s);
  }
  if (drafter_) PlanDrafts(decoding, draft_budget);
  for (Slot* sp : decoding) {
    Slot& s = *sp;
    s.logits_index = batch_->Add(s.id, s.next, static_cast<int>(s.cached.size()), true);
    s.cached.push_back(s.next);
    for (engine::Token d : s.planned) {
      const int idx = batch_->Add(s.id, d, static_cast<int>(s.cached.size()), true);
      if (idx < 0) break;
      s.draft.push_back(d);
      s.draft_index.push_back(idx);
      s.cached.push_back(d);
    }
    if (s.draft.empty() && !s.planned.empty()) drafter_->Accept(s.id, 0, 0);  // none fit the batch
    s.planned.clear();
    ++seqs;
  }
  // 2. Prompt chunks fill the rest of the batch, smaller while others stream.
  int budget = opt_.batch - batch_->size();
  if (batch_->size() > 0) budget = std::min(budget, opt_.prefill_chunk);
  const size_t n = slots_.size();
  const int generating = batch_->size();
  int prefill_tokens = 0;
  for (size_t k = 0; k < n && budget > 0; ++k) {
    Slot& s = *slots_[(prefill_rr_ + k) % n];
    if (!s.job || s.generating()) continue;
    const auto& prompt = s.job->prompt;
    size_t take = std::min<size_t>(budget, prompt.size() - s.prefilled);
    for (size_t i = 0; i < take; ++i) {
      size_t at = s.prefilled + i;
      bool last = at + 1 == prompt.size();
      int idx = batch_->Add(s.id, prompt[at], static_cast<int>(at), last);
      if (last) s.logits_index = idx;
      s.cached.push_back(prompt[at]);
    }
    s.prefilled += take;
    prefill_tokens += static_cast<int>(take);
    budget -= static_cast<int>(take);
    ++seqs;
  }
  prefill_rr_ = (prefill_rr_ + 1) % n;
  if (batch_->size() == 0) return;
  max_seqs_per_step_.store(std::max(max_seqs_per_step_.load(), seqs));
  ++steps_;
  const auto decode_start = Clock::now();
  Status decoded = batch_->Decode();
  // Only a step that ran is a measurement: a refused batch returns at once
  // and would make prefill look nearly free to the forecast.
  const double step_seconds = std::chrono::duration<double>(Clock::now() - decode_start).count();
  if (decoded) forecaster_.RecordStep(step_seconds, prefill_tokens, generating);
  if (!decoded) {
    RetryAlone(decoded.error().message);
    UpdateGauges();
    return;
  }
  // 3. Sample where logits came out (which clears each slot's drafts: ask first).
  int drafts = 0;
  for (const Slot* d : decoding) drafts += static_cast<int>(d->draft.size());
  for (auto& sp : slots_) Sample(*sp);
  // The whole step, drafting and sampling each draft's position included:
  // on a small model those cost as much as the decode they ride on.
  const double whole_step = std::chrono::duration<double>(Clock::now() - step_start).count();
  if (drafter_ && prefill_tokens == 0) {
    RecordStepCost(decoding.size(), generating, drafts, whole_step);
    MeasureSpec(drafts > 0, whole_step, tokens_this_step_);
  }
  if (step_trace_) TraceStep(generating, prefill_tokens, drafts, step_seconds, whole_step);
  UpdateGauges();
}

// One request's failure here (llama.cpp's grammar throws on a token it cannot
// accept; bad_alloc) ends that request.
void Scheduler::Sample(Slot& s) {
  if (!s.job || s.logits_index < 0) return;
  if (!s.draft.empty()) return SampleDrafted(s);
  try {
    OnToken(s, s.sampler->Sample(*session_, s.logits_index));
  } catch (const std::exception& e) {
    if (s.job) FinishSlot(s, Finish::kError, std::string("sampling failed: ") + e.what());
  }
}

// A failed step is retried one sequence at a time, each in a batch of its
// own, before any sequence is failed: a sequence llama.cpp cannot take (no
// KV room for its chunk, an input it refuses) then fails alone and the
// others go on. llama.cpp may keep the ubatches it processed before the
// failure, so each sequence's cache is first cut back to where the step began.
void Scheduler::RetryAlone(const std::string& error) {
  metrics_->Add(metric::kDecodeRetries, name_);
  int failed = 0;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.job || s.cached.size() == s.step_from) continue;  // not in this step
    if (!s.draft.empty()) {                                  // retried without its drafts
      s.cached.resize(s.step_from + 1);
      s.draft.clear();
      s.draft_index.clear();
      if (drafter_) drafter_->Accept(s.id, 0, 0);  // never checked: tells the drafter nothing
    }
    const bool wants_logits = s.logits_index >= 0;
    Status st = Status::Ok();
    if (!session_->TruncateSequence(s.id, static_cast<int>(s.step_from)))
      st = MakeError(ErrorCode::kInternal, "its cache could not be cut back");
    for (size_t at = s.step_from; st && at < s.cached.size(); ++at) {
      const bool last = wants_logits && at + 1 == s.cached.size();
      const int idx = batch_->Add(s.id, s.cached[at], static_cast<int>(at), last);
      if (last) s.logits_index = idx;
    }
    if (st) st = batch_->Decode();
    if (!st) {
      ++failed;
      session_->ClearSequence(s.id);
      s.cached.clear();
      FinishSlot(s, Finish::kError, "decode failed: " + st.error().message);
      continue;
    }
    Sample(s);
  }
  std::fprintf(stderr,
               "hone: model %s: a batched decode failed (%s); retried one sequence at a time, %d failed\n",
               name_.c_str(), error.c_str(), failed);
}

void Scheduler::OnToken(Slot& s, engine::Token t) {
  ++tokens_this_step_;
  const auto now = Clock::now();
  if (s.result.timings.first_token == Clock::time_point{}) {
    s.result.timings.first_token = now;
    metrics_->Observe(metric::kTtft, name_,
                      std::chrono::duration<double>(now - s.result.timings.enqueued).count());
  } else {
    metrics_->Observe(metric::kItl, name_, std::chrono::duration<double>(now - s.last_token).count());
  }
  s.last_token = now;
  engine::Tokenizer tok(*model_);
  if (tok.IsEndOfGeneration(t)) return FinishSlot(s, Finish::kStop);
  ++s.result.completion_tokens;
  const auto& keep = s.job->preserved_tokens;
  const bool as_text = !keep.empty() && std::find(keep.begin(), keep.end(), t) != keep.end();
  s.job->Emit(s.stops->Push(s.utf8.Push(tok.Piece(t, as_text))));
  if (s.stops->stopped()) return FinishSlot(s, Finish::kStop);
  if (s.job->max_tokens >= 0 && s.result.completion_tokens >= s.job->max_tokens) {
    return FinishSlot(s, Finish::kLength);
  }
  if (static_cast<int>(s.cached.size()) + 1 >= opt_.ctx_per_slot) return FinishSlot(s, Finish::kLength);
  s.next = t;
}

void Scheduler::FinishSlot(Slot& s, Finish why, const std::string& error) {
  if (why == Finish::kStop || why == Finish::kLength) {
    if (!s.stops->stopped()) s.job->Emit(s.stops->Push(s.utf8.Flush()));
    s.job->Emit(s.stops->Flush());
  }
  s.result.finish = why;
  s.result.error = error;
  s.result.stop_sequence = s.stops ? s.stops->matched() : "";
  s.result.timings.finished = Clock::now();
  const JobTimings& t = s.result.timings;
  metrics_->Add(metric::kPromptTokens, name_, s.result.prompt_tokens);
  metrics_->Add(metric::kGenTokens, name_, s.result.completion_tokens);
  if (why == Finish::kStop || why == Finish::kLength) {
    metrics_->Add(metric::kRequestSuccess, name_);
    metrics_->Observe(metric::kE2e, name_, t.total_seconds());
  }
  forecaster_.RecordAnswer(s.result.completion_tokens);
  // A warmed shared prefix goes to the cache now, not when its slot is
  // taken: the next tenant's request would extend it in place.
  if (s.scope == kSharedScope && (why == Finish::kLength || why == Finish::kStop)) SaveSlot(s);
  --active_;  // before waking the client, so a finished job never sees itself counted
  auto job = std::move(s.job);
  s.sampler.reset();
  s.last_used = Clock::now();
  // The gauges too: a client that scrapes /metrics as soon as its answer
  // arrives must not find its finished request still running.
  UpdateGauges();
  job->Finish(s.result);
}

void Scheduler::UpdateGauges() {
  size_t used = 0;
  for (auto& s : slots_) used += s->cached.size();
  metrics_->Set(metric::kRunning, name_, active_.load());
  metrics_->Set(metric::kKvUsage, name_,
                static_cast<double>(used) / (static_cast<double>(opt_.ctx_per_slot) * slots_.size()));
}

}  // namespace hone::serve
