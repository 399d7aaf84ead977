// One slot of a Scheduler: a KV sequence and the job it runs. Private to
// the scheduler's own files (scheduler.cc, scheduler_cache.cc); driven by
// the scheduler thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "serve/scheduler.h"
#include "serve/shared_prefixes.h"

namespace hone::serve {

struct Scheduler::Slot {
  int id = 0;
  std::shared_ptr<Job> job;             // null when free
  std::shared_ptr<const Job> last_job;  // the latest job admitted here: its prompt is in the KV
  std::unique_ptr<engine::Sampler> sampler;
  std::unique_ptr<engine::StopMatcher> stops;
  engine::Utf8Stream utf8;
  std::vector<engine::Token> cached;  // tokens whose KV this sequence holds
  std::string scope;                  // the cache scope of the jobs whose tokens those are
  size_t prefilled = 0;               // prompt tokens already in the KV cache
  engine::Token next = -1;            // sampled, not yet decoded
  int logits_index = -1;              // output of this slot in the current step
  size_t step_from = 0;               // cached.size() when the current step began
  JobResult result;
  // Speculative decoding (scheduler_spec.cc): this step's drafts after
  // `next` and their outputs, the draft length it earns, and steps to sit
  // out after drafts that kept missing.
  std::vector<engine::Token> planned;  // this step's draft, before it goes into the batch
  std::vector<engine::Token> draft;
  std::vector<int> draft_index;
  int spec_len = 4;
  int spec_misses = 0;
  int spec_pause = 0;
  // This answer's share of drafts kept (each given the ones before it were),
  // from the model's running share when it starts; steps since the cost
  // model last let it draft (it then drafts one token to measure again).
  DraftAcceptance spec_accept;
  int spec_idle = 0;
  Clock::time_point last_token, last_used;
  bool generating() const { return job && prefilled == job->prompt.size(); }
};

}  // namespace hone::serve
