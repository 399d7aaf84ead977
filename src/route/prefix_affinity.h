// Prefix affinity: which replica has most likely kept a prompt's prefix (the
// shared system prompt) in its KV cache. The router cannot see a replica's
// cache, so, like the inference gateway's approximate prefix scorer, it
// remembers what it sent where: the prompt is cut into blocks of
// kPrefixBlockBytes, each block's hash chained over the blocks before it, and
// each target keeps an LRU set of the hashes of prompts routed to it. The
// leading blocks a target has seen are the prefix it likely holds.
//
// Blocks are bytes of the request (roles and contents in order), not tokens:
// the router needs no tokenizer of the replicas' model. 256 bytes is about
// 64 tokens of English (a little fewer of Chinese).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace hone::route {

inline constexpr size_t kPrefixBlockBytes = 256;
inline constexpr size_t kPrefixMaxBlocks = 256;  // 64 KiB: past that the prefix is not what differs

struct PromptBlocks {
  std::vector<uint64_t> hashes;  // one per whole block, chained
  size_t bytes = 0;              // the whole request text, blocks or not
};
PromptBlocks PrefixBlocks(const backend::GenerationRequest& r);

// Thread-safe. Capacity is per target, in blocks.
class PrefixIndex {
 public:
  explicit PrefixIndex(size_t blocks_per_target = 1 << 16) : capacity_(blocks_per_target) {}
  // How many leading blocks of `p` were sent to `target` (and are still remembered).
  size_t Match(const std::string& target, const PromptBlocks& p) const;
  // `p` went to `target`: its blocks become the most recent there.
  void Record(const std::string& target, const PromptBlocks& p);

 private:
  struct Lru {
    std::list<uint64_t> order;  // most recent first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<std::string, Lru> targets_;  // GUARDED_BY(mu_)
};

}  // namespace hone::route
