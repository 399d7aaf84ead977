// Multi-sequence batched decoding: one llama_decode carries tokens of many
// sequences at once. The server's continuous batching builds on this; here it
// also powers GenerateParallel (several prompts advanced in lock-step).
#pragma once

#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/session.h"
#include "util/result.h"

struct llama_batch;

namespace hone::engine {

class BatchDecoder {
 public:
  // capacity: most tokens one Decode() may carry (<= the session's n_batch).
  BatchDecoder(Session& session, int capacity);
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // Queues one token; returns its output index when want_logits, else -1.
  // Returns -2 when the batch is full (call Decode first).
  int Add(int seq, Token token, int pos, bool want_logits);
  int size() const;
  int capacity() const { return capacity_; }
  bool full() const { return size() >= capacity_; }
  // Runs the queued tokens through the model and empties the batch.
  Status Decode();

 private:
  Session& session_;
  int capacity_;
  int n_outputs_ = 0;
  llama_batch* batch_;
};

// Runs several independent generations at once, one decode step per token for
// all of them (the shape of continuous batching). Requires a session with
// n_seq_max >= requests.size(); request i uses sequence i.
Result<std::vector<GenerateResult>> GenerateParallel(Session& session,
                                                     const std::vector<GenerateRequest>& requests);

}  // namespace hone::engine
