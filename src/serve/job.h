// One generation request as the scheduler sees it, and the channel its tokens
// flow back through. The HTTP thread that owns the client waits on the channel;
// the model's scheduler thread fills it. Either side may end the job early:
// the client by Cancel() (disconnect), the scheduler by finishing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "serve/contract_names.h"

namespace hone::serve {

// Why a job ended: the Backend's own reasons (backend/backend.h), plus kNone
// while it runs.
using Finish = FinishReason;

struct JobTimings {
  Clock::time_point enqueued;
  Clock::time_point started;      // a slot took it
  Clock::time_point first_token;  // first token sampled
  Clock::time_point finished;
  double queue_seconds() const;
  double prompt_seconds() const;  // slot start -> first token (prefill)
  double gen_seconds() const;     // first token -> finish
  double total_seconds() const;   // enqueue -> finish
};

struct JobResult {
  Finish finish = Finish::kNone;
  std::string error;  // with Finish::kError
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens reused from the prefix cache
  int completion_tokens = 0;
  int draft_tokens = 0;     // speculative decoding: tokens drafted for it...
  int accepted_tokens = 0;  // ...and kept
  std::string stop_sequence;  // the stop string that ended it, if one did
  JobTimings timings;
};

class Job {
 public:
  Job(std::vector<engine::Token> prompt, int max_tokens, engine::SamplingOptions sampling,
      std::vector<std::string> stops, Clock::time_point deadline,
      std::vector<engine::Token> preserved_tokens = {}, std::string cache_scope = {});

  // --- set at creation, read by the scheduler ---
  const std::vector<engine::Token> prompt;
  const int max_tokens;  // < 0: until end of generation or the slot's context is full
  const engine::SamplingOptions sampling;
  const std::vector<std::string> stops;
  const Clock::time_point deadline;
  // Special tokens that are part of the answer's text (a tool call's markers).
  const std::vector<engine::Token> preserved_tokens;
  // Whose cached prefixes it may reuse, in a slot or the prompt cache (serve/prompt_cache.h: CacheScope).
  const std::string cache_scope;
  const Clock::time_point created = Clock::now();

  // Client side: ask the scheduler to stop this job at its next step.
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Client side: waits up to `wait` for text. Returns the text produced since
  // the last call (valid UTF-8, possibly empty) and sets *done once the job has
  // finished and everything was handed out.
  std::string Take(std::chrono::milliseconds wait, bool* done);
  // Blocks until the job ends; returns all remaining text.
  std::string WaitAll();
  JobResult result() const;

  // Scheduler side.
  void Emit(const std::string& text);
  void Finish(const JobResult& result);

 private:
  std::atomic<bool> cancelled_{false};
  // mu_ guards the hand-over between the scheduler thread (Emit, Finish) and
  // the reader (everything below); cv_ wakes the reader on either.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;    // GUARDED_BY(mu_): text emitted, not yet read
  bool finished_ = false;  // GUARDED_BY(mu_)
  JobResult result_;       // GUARDED_BY(mu_): valid once finished_
};

}  // namespace hone::serve
