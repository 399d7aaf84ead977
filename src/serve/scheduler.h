// Continuous batching for one loaded model: a thread that owns the model's
// Session and advances every active request by one llama_decode per step.
//
// A request's life (one Job in one slot):
//
//   Submit ──> WAITING (bounded queue; full -> kQueueFull, the caller answers 429/503)
//                 │  a slot frees up; the slot whose cached tokens share the longest
//                 │  prefix with the prompt is chosen, and its KV is kept up to there
//                 v
//              PREFILL  a chunk of the prompt rides in each step (at most
//                 │      prefill_chunk tokens while other slots are generating, so a
//                 │      long prompt never freezes their streams)
//                 v      last prompt token -> logits -> first token sampled
//              GENERATE one token per step, batched with every other slot
//                 │
//                 v      end of generation, stop string, max_tokens, context
//              FINISHED  full, client cancel (checked every step), deadline
//
// A finished slot keeps its tokens in the KV cache: the next request with the
// same prefix (a shared system prompt) only prefills what differs. When a
// slot is taken for another prompt, what it held goes to the prompt cache
// (serve/prompt_cache.h) first, and a prompt that finds a longer prefix
// there than in any slot has it restored instead of prefilled. Prefixes are
// reused only within one cache scope (a tenant, or a cache_salt).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/batch_decoder.h"
#include "engine/drafter.h"
#include "engine/session.h"
#include "engine/utf8.h"
#include "serve/draft_cost.h"
#include "serve/forecaster.h"
#include "serve/job.h"
#include "serve/metrics.h"
#include "serve/prompt_cache.h"
#include "serve/shared_prefixes.h"
#include "util/result.h"

namespace hone::serve {

enum class KvUnified { kAuto, kOn, kOff };

struct SchedulerOptions;
// Whether a scheduler with these options puts its slots in one KV stream.
bool UsesSharedKv(const SchedulerOptions& opt);

struct SchedulerOptions {
  int slots = 4;            // parallel sequences
  int ctx_per_slot = 4096;  // KV cells per sequence (rounded up to 256)
  int batch = 512;          // most tokens per decode step
  int prefill_chunk = 256;  // most prompt tokens per step while others generate
  int max_queue = 64;       // requests that may wait while every slot is busy
  int threads = 0;          // 0 = physical cores
  // Niceness of the decode thread and its OpenMP team (they inherit it):
  // above 0, HTTP, probes and refusals preempt inference when it holds
  // every core, and inference still takes all the CPU they leave.
  int nice = 0;
  engine::FlashAttn flash_attn = engine::FlashAttn::kAuto;
  std::string kv_type = "f16";
  // All slots in one KV stream (engine::SessionOptions::kv_unified): mixed
  // steps (drafts beside single tokens, slots with gaps in their ids) run
  // as one forward pass instead of several, but every token's attention
  // walks all slots' cells (masked), which costs with long contexts in many
  // slots (bench/kv_layout.py). Auto: one stream per slot, drafting or
  // not (a drafting model then drafts only for a slot generating alone:
  // serve/scheduler_spec.cc, measured there).
  KvUnified kv_unified = KvUnified::kAuto;
  uint64_t memory_budget_bytes = 0;
  // Run parameters from a tuned profile (threads, pinning, ubatch, attention,
  // KV type); when set they replace threads/flash_attn/kv_type above.
  std::optional<engine::SessionOptions> tuned;
  // The prompt cache beyond the slots; both budgets 0: off.
  PromptCacheOptions cache;
  // Speculative decoding (engine/drafter.h): "none", an n-gram mode
  // ("ngram-simple", ...), "draft-simple" with draft_model, or a list tried
  // in order. Each slot drafts up to spec_max tokens per step, adapting to
  // its own acceptance.
  std::string spec = "none";
  // The draft model (its vocabulary checked against the target's at
  // Create); it gets its own context with one sequence per slot.
  std::shared_ptr<engine::Model> draft_model;
  int spec_max = 64;
  int spec_ngram = 0;  // tokens the n-gram lookup matches; 0: llama.cpp's default (12)
  // Drafting pauses when its measured tokens/s fall below this share of plain
  // decoding's (scheduler_spec.cc); 0: always draft, never probe.
  double spec_min_gain = 0.97;
};

enum class SubmitResult { kOk, kQueueFull, kStopping };

class Scheduler;

// A place in a scheduler's queue, held while a request prepares (its
// template, tokens and sampler) and then used by Submit. Requests preparing
// at once cannot all pass a check the queue has not seen yet: a burst of a
// thousand renders no more templates than the queue and the slots can take,
// and the rest are refused at once. Giving it up (destruction) frees it.
class QueuePlace {
 public:
  QueuePlace() = default;
  QueuePlace(QueuePlace&& o) noexcept : sched_(std::exchange(o.sched_, nullptr)) {}
  QueuePlace& operator=(QueuePlace&& o) noexcept;
  QueuePlace(const QueuePlace&) = delete;
  QueuePlace& operator=(const QueuePlace&) = delete;
  ~QueuePlace();
  explicit operator bool() const { return sched_ != nullptr; }

 private:
  friend class Scheduler;
  explicit QueuePlace(Scheduler* s) : sched_(s) {}
  Scheduler* sched_ = nullptr;
};

class Scheduler {
 public:
  // Creates the session and starts the thread.
  static Result<std::unique_ptr<Scheduler>> Create(std::shared_ptr<engine::Model> model,
                                                   const SchedulerOptions& opt, Metrics* metrics,
                                                   std::string model_name);
  ~Scheduler();  // cancels everything still running and joins the thread
  friend class QueuePlace;

  // Checks the request (prompt length, sampling options, grammar) and queues it.
  // Errors: kInvalidArgument. kQueueFull when the queue is at max_queue.
  // `place` (from HoldPlace): the job takes that place, which the queue had
  // kept for it; the place is used up when the job is queued.
  Result<SubmitResult> Submit(std::shared_ptr<Job> job, QueuePlace* place = nullptr);
  // A place in the queue, or an empty one when the queue, with the places
  // other requests hold, is full (the caller answers 429/503 at once).
  QueuePlace HoldPlace();

  // Thread-safe; costs a pass over the waiting queue, the slots and the
  // prompt cache's entries. `scope`: the request's cache scope (Job::cache_scope).
  LoadForecast Forecast(const std::vector<engine::Token>& prompt, int max_tokens,
                        const std::string& scope = {}) const;
  // Declares `prefix` (a shared system prompt's tokens, SystemPromptPrefix)
  // reusable by every cache scope, and warms it: unless the prompt cache
  // holds it already (from before a restart), a one-token job prefills it
  // and its KV goes to the cache. Thread-safe.
  void ShareSystemPrefix(std::vector<engine::Token> prefix);
  // The prompt cache, or null when it is off. Thread-safe (List, Clear).
  PromptCache* prompt_cache() const { return cache_.get(); }

  int active() const { return active_.load(); }  // slots busy
  int waiting() const;
  // Submit would answer kQueueFull now (places held count as taken).
  bool QueueFull() const;
  bool idle() const { return active() == 0 && waiting() == 0; }
  int ctx_per_slot() const { return opt_.ctx_per_slot; }
  const SchedulerOptions& options() const { return opt_; }
  // Test hooks: how many sequences the fullest decode step carried, and steps run.
  int max_seqs_per_step() const { return max_seqs_per_step_.load(); }
  long steps() const { return steps_.load(); }

 private:
  struct Slot;
  struct Pending {
    std::shared_ptr<Job> job;
    std::unique_ptr<engine::Sampler> sampler;
  };
  Scheduler(std::shared_ptr<engine::Model> model, const SchedulerOptions& opt, Metrics* metrics,
            std::string name);
  void Loop();
  // Queued jobs whose client left or whose deadline passed end now and free
  // their place (each step, before admission).
  void DropAbandoned();
  void Admit();
  void Step();
  void OnToken(Slot& s, engine::Token t);
  void Sample(Slot& s);                       // the token from this step's logits, if it has any
  void RetryAlone(const std::string& error);  // after a failed step
  // serve/scheduler_spec.cc: speculative decoding per slot.
  // Asks the drafter (all slots in one batch) and leaves each decoding
  // slot's draft for this step in Slot::planned, trimmed to what pays,
  // within `budget` tokens in all.
  void PlanDrafts(const std::vector<Slot*>& decoding, int budget);
  int DraftRoom(const Slot& s) const;
  int DraftLength(Slot& s, int available, int step_tokens, double step_emitted, bool own_pass);
  void RecordStepCost(size_t slots_decoding, int tokens, int drafts, double seconds);
  void SampleDrafted(Slot& s);  // verifies a drafted step: keeps drafts while the sampler agrees
  bool SpecAllowedNow();        // this step may draft (not paused for not paying, not probing)
  void MeasureSpec(bool drafted, double seconds, int emitted);  // a decode-only step's tokens per second
  // GUARDED_BY(scheduler thread): tokens per second of decode-only steps
  // with drafts and without (EWMA), how many of each were seen, steps left
  // without drafting, steps since the last plain probe.
  double spec_rate_ = 0, plain_rate_ = 0;
  int spec_samples_ = 0, plain_samples_ = 0, spec_off_steps_ = 0, spec_steps_since_probe_ = 0;
  int spec_off_length_ = 256;  // the next pause; doubles while drafting keeps losing
  int tokens_this_step_ = 0;   // tokens emitted in the current step
  // GUARDED_BY(scheduler thread): decode-only steps' seconds (drafting and
  // sampling included) against their tokens (what a draft costs), and the
  // share of drafts kept across answers.
  StepCost step_cost_;
  StepCost pass_cost_;  // steps of one generating slot: one pass of one sequence
  DraftAcceptance spec_accept_{0.5, 0.95};
  // HONE_STEP_TRACE=FILE: one CSV line per step (what a step carried and
  // what it cost), for finding where time goes; null when unset.
  // GUARDED_BY(scheduler thread).
  std::FILE* step_trace_ = nullptr;
  void OpenStepTrace();
  void TraceStep(int decode_tokens, int prefill_tokens, int drafted, double decode_s, double whole_s);
  void FinishSlot(Slot& s, Finish why, const std::string& error = "");
  void UpdateGauges();
  // serve/scheduler_cache.cc: the slots and the prompt cache.
  // Within a scope, all they share; across scopes, only declared prefixes.
  size_t SharedPrefix(const Slot& s, const Job& job) const;
  CacheMatch FindCached(const std::string& scope, const std::vector<engine::Token>& prompt) const;
  CacheMatch WorthRestoring(const Job& job, size_t have);  // kNone: prefill or copy instead
  // false: the slot is left empty (and an entry llama.cpp refused is dropped)
  bool RestoreFromCache(Slot& s, const CacheMatch& m, const std::vector<uint8_t>& state, CacheTier served);
  void SaveSlot(Slot& s);  // what the slot holds, into the prompt cache (before it is overwritten)
  // Admit's choice for the queue's first job: the free slot holding the
  // longest prefix of its prompt, and another slot holding a longer one to
  // copy from.
  struct SlotPick {
    Slot* best = nullptr;
    size_t best_common = 0;
    Slot* donor = nullptr;
    size_t donor_common = 0;
  };
  bool TakeNext(Pending* p, SlotPick* pick);        // pops it, under mu_; false: empty queue or no free slot
  void StartSlot(Pending p, const SlotPick& pick);  // KV reuse, restore or copy, then the slot's fresh state
  void Publish();                                   // the slots' state for Forecast, after each step
  Clock::time_point forecast_gauges_at_{};          // scheduler thread only: last slot-wait gauge update

  std::shared_ptr<engine::Model> model_;
  SchedulerOptions opt_;
  Metrics* metrics_;
  std::string name_;
  std::unique_ptr<engine::Session> session_;
  std::unique_ptr<engine::BatchDecoder> batch_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<PromptCache> cache_;        // null when off; its own lock
  SharedPrefixes shared_;                     // its own lock
  std::unique_ptr<engine::Drafter> drafter_;  // null without speculation; scheduler thread only
  size_t prefill_rr_ = 0;                     // round-robin start among prefilling slots

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  int places_held_ = 0;        // GUARDED_BY(mu_): QueuePlaces not yet used or given up
  bool stopping_ = false;      // GUARDED_BY(mu_)
  std::atomic<int> active_{0};
  std::atomic<int> max_seqs_per_step_{0};
  std::atomic<long> steps_{0};

  Forecaster forecaster_;  // its own lock; fed after each step, read by Forecast
  int RoomLocked() const;  // needs mu_: places left in the queue
  std::thread thread_;
};

}  // namespace hone::serve
