#include "serve/cache_ram_limit.h"

#include <algorithm>

#include "serve/prompt_cache.h"

namespace hone::serve {

void CacheRamLimit::Join(PromptCache* cache) {
  std::lock_guard<std::mutex> lock(members_mu_);
  members_.push_back(cache);
}

void CacheRamLimit::Leave(PromptCache* cache) {
  std::lock_guard<std::mutex> lock(members_mu_);
  members_.erase(std::remove(members_.begin(), members_.end(), cache), members_.end());
}

void CacheRamLimit::Enforce() {
  std::lock_guard<std::mutex> lock(members_mu_);
  while (used_.load() > limit_) {
    PromptCache* oldest = nullptr;
    std::chrono::steady_clock::time_point oldest_use;
    for (PromptCache* c : members_) {
      auto use = c->OldestRamUse();
      if (use && (!oldest || *use < oldest_use)) {
        oldest = c;
        oldest_use = *use;
      }
    }
    if (!oldest || !oldest->EvictOldestRam()) return;  // nothing left in RAM to evict
  }
}

}  // namespace hone::serve
