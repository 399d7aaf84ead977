// An exact-match cache of whole answers, for hot requests (the same FAQ
// asked again). In the process, capped in bytes, each entry with a TTL,
// least recently used out first.
//
//   key    SHA-256 of the canonical request: tenant, model (the route), the
//          messages or prompts, every sampling field, stops, response format,
//          tools, tool choice. One tenant's answers are never another's.
//   value  the answer's events as they came (text pieces, tool-call pieces,
//          choice ends with usage), so a streamed hit replays as the same
//          stream of chunks, not one blob.
//
// Only whole answers go in: every choice ended with stop or tool_calls (an
// error, a cancel, a timeout or a length cut is never stored). By default
// only deterministic requests are looked up (temperature 0 or a fixed seed);
// a route may cache all.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace hone::route {

struct CachedAnswer {
  std::string model;
  std::vector<backend::CompletionEvent> events;  // in order, kDone last
  size_t choices = 1;
  size_t bytes = 0;
};

// The canonical request, hashed. Empty when the request cannot be cached
// (it continues a partial answer).
std::string CacheKey(const backend::GenerationRequest& r);
// Temperature 0 (greedy) or a fixed seed: the same request gives the same answer.
bool Deterministic(const backend::GenerationRequest& r);

class ResponseCache {
 public:
  ResponseCache(size_t max_bytes, double ttl_s) : max_bytes_(max_bytes), ttl_s_(ttl_s) {}

  std::shared_ptr<const CachedAnswer> Get(const std::string& key);
  // Stores (or replaces) an answer; one bigger than a quarter of the cap is not kept.
  void Put(const std::string& key, std::shared_ptr<const CachedAnswer> answer);

  struct Stats {
    long hits = 0, misses = 0, stores = 0, evictions = 0, expired = 0;
    size_t bytes = 0, entries = 0;
  };
  Stats stats() const;
  size_t max_bytes() const { return max_bytes_; }
  double ttl_s() const { return ttl_s_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedAnswer> answer;
    Clock::time_point expires;
  };
  void EraseLocked(std::list<Entry>::iterator it);

  const size_t max_bytes_;
  const double ttl_s_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // GUARDED_BY(mu_): most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // GUARDED_BY(mu_)
  Stats stats_;  // GUARDED_BY(mu_)
};

// Replays a cached answer as a Completion.
class CachedCompletion final : public backend::Completion {
 public:
  CachedCompletion(std::shared_ptr<const CachedAnswer> answer, std::string note)
      : answer_(std::move(answer)), note_(std::move(note)) {}
  backend::CompletionEvent Next(backend::Clock::time_point deadline) override;
  void Cancel() override { cancelled_ = true; }
  size_t choices() const override { return answer_->choices; }
  const std::string& model() const override { return answer_->model; }
  double load_seconds() const override { return 0; }
  const char* cache_status() const override { return "hit"; }

 private:
  std::shared_ptr<const CachedAnswer> answer_;
  std::string note_;
  size_t next_ = 0;
  std::atomic<bool> cancelled_{false};  // Cancel may come from another thread
};

// Passes an answer through and, when it ended whole, stores it.
class RecordingCompletion final : public backend::Completion {
 public:
  RecordingCompletion(std::unique_ptr<backend::Completion> inner, ResponseCache* cache, std::string key)
      : inner_(std::move(inner)), cache_(cache), key_(std::move(key)) {}
  backend::CompletionEvent Next(backend::Clock::time_point deadline) override;
  void Cancel() override {
    cancelled_ = true;
    inner_->Cancel();
  }
  size_t choices() const override { return inner_->choices(); }
  const std::string& model() const override { return inner_->model(); }
  double load_seconds() const override { return inner_->load_seconds(); }
  const char* cache_status() const override { return "miss"; }

 private:
  std::unique_ptr<backend::Completion> inner_;
  ResponseCache* cache_;
  const std::string key_;
  std::shared_ptr<CachedAnswer> answer_ = std::make_shared<CachedAnswer>();  // the reading thread's
  bool whole_ = true;                      // the reading thread's
  std::atomic<bool> cancelled_{false};     // Cancel may come from another thread: never stored
};

}  // namespace hone::route
