// One --cache-ram for the whole server. Every loaded model's prompt cache
// draws its RAM tier from it, and when the sum passes the limit the least
// recently used entry of any model leaves RAM first: an idle model's old
// conversations give way to a busy model's, and N models never hold N
// times the limit (which, with the default of a quarter of free memory,
// would run the machine out of memory).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace hone::serve {

class PromptCache;

class CacheRamLimit {
 public:
  explicit CacheRamLimit(uint64_t bytes) : limit_(bytes) {}
  CacheRamLimit(const CacheRamLimit&) = delete;
  CacheRamLimit& operator=(const CacheRamLimit&) = delete;

  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_.load(); }

  // A cache joins in its constructor and leaves first thing in its
  // destructor, so Enforce never calls into a cache being destroyed.
  void Join(PromptCache* cache);
  void Leave(PromptCache* cache);
  // Takes no lock: caches call it while holding their own.
  void Charge(int64_t delta) { used_ += static_cast<uint64_t>(delta); }
  // Evicts the least recently used RAM entries, across every member, until
  // the sum is within the limit. Call it holding no cache's lock.
  void Enforce();

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  // Guards members_. Enforce holds it while it calls into caches, so a
  // cache's own lock nests inside it and is never held when taking it.
  std::mutex members_mu_;
  std::vector<PromptCache*> members_;
};

}  // namespace hone::serve
