#include "route/prefix_affinity.h"

namespace hone::route {
namespace {

// FNV-1a, 64 bit: fast, and collisions only cost a wrong guess of affinity.
uint64_t Hash(uint64_t h, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

PromptBlocks PrefixBlocks(const backend::GenerationRequest& r) {
  // The request as the text that reaches the template: each message's role
  // and content, separated so "ab"+"c" and "a"+"bc" differ.
  std::string text = r.model;
  text += '\x1f';
  if (r.chat) {
    for (const backend::Message& m : r.messages) {
      text += m.role;
      text += '\x1e';
      text += m.content;
      text += '\x1f';
      if (text.size() >= kPrefixBlockBytes * kPrefixMaxBlocks) break;
    }
  } else if (!r.prompts.empty()) {
    text += r.prompts.front();
  }
  PromptBlocks out;
  out.bytes = text.size();
  uint64_t h = 14695981039346656037ull;
  const size_t blocks = std::min(text.size() / kPrefixBlockBytes, kPrefixMaxBlocks);
  for (size_t b = 0; b < blocks; ++b) {
    h = Hash(h, text.data() + b * kPrefixBlockBytes, kPrefixBlockBytes);
    out.hashes.push_back(h);
  }
  return out;
}

size_t PrefixIndex::Match(const std::string& target, const PromptBlocks& p) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = targets_.find(target);
  if (t == targets_.end()) return 0;
  size_t n = 0;
  while (n < p.hashes.size() && t->second.where.count(p.hashes[n])) ++n;
  return n;
}

void PrefixIndex::Record(const std::string& target, const PromptBlocks& p) {
  std::lock_guard<std::mutex> lock(mu_);
  Lru& lru = targets_[target];
  // The last block goes in first, so the first block is the most recent:
  // evicting from the back drops a prefix's tail, never the head its other
  // blocks' chained hashes depend on.
  for (auto b = p.hashes.rbegin(); b != p.hashes.rend(); ++b) {
    const uint64_t h = *b;
    auto it = lru.where.find(h);
    if (it != lru.where.end()) lru.order.erase(it->second);
    lru.order.push_front(h);
    lru.where[h] = lru.order.begin();
  }
  while (lru.order.size() > capacity_) {
    lru.where.erase(lru.order.back());
    lru.order.pop_back();
  }
}

}  // namespace hone::route
