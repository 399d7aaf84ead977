#include "route/response_cache.h"

#include <nlohmann/json.hpp>

#include "route/keyring.h"

namespace hone::route {
namespace {

using Kind = backend::CompletionEvent::Kind;

template <class T>
nlohmann::json Opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

size_t EventBytes(const backend::CompletionEvent& e) {
  return sizeof(e) + e.text.size() + e.tool.id.size() + e.tool.name.size() + e.tool.arguments.size() +
         e.result.stop_sequence.size() + e.result.route.size();
}

}  // namespace

bool Deterministic(const backend::GenerationRequest& r) {
  return (r.sampling.temperature && *r.sampling.temperature <= 0) || r.sampling.seed.has_value();
}

std::string CacheKey(const backend::GenerationRequest& r) {
  if (r.continue_final) return "";
  using json = nlohmann::json;
  json messages = json::array();
  for (const backend::Message& m : r.messages) {
    json calls = json::array();
    for (const backend::ToolCall& c : m.tool_calls) calls.push_back({c.id, c.name, c.arguments});
    messages.push_back({m.role, m.content, calls, m.tool_call_id, m.name});
  }
  json tools = json::array();
  for (const backend::Tool& t : r.tools) tools.push_back({t.name, t.description, t.parameters});
  const backend::Sampling& s = r.sampling;
  // Arrays, not objects: the order is fixed here, and a field added later
  // changes every key (old entries simply miss).
  json canonical = {
      "v1",
      r.tenant,
      r.model,
      r.chat,
      messages,
      r.prompts,
      r.raw,
      r.max_tokens,
      {Opt(s.temperature), Opt(s.top_p), Opt(s.top_k), Opt(s.min_p), Opt(s.seed), Opt(s.repeat_penalty),
       Opt(s.repeat_last_n), Opt(s.presence_penalty), Opt(s.frequency_penalty)},
      r.stop,
      {static_cast<int>(r.format.type), r.format.schema.dump()},
      tools,
      {static_cast<int>(r.tool_choice.mode), r.tool_choice.function},
      Opt(r.parallel_tool_calls),
  };
  return Sha256Hex(canonical.dump());
}

std::shared_ptr<const CachedAnswer> ResponseCache::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  if (Clock::now() >= it->second->expires) {
    EraseLocked(it->second);
    ++stats_.expired;
    ++stats_.misses;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.hits;
  return lru_.front().answer;
}

void ResponseCache::Put(const std::string& key, std::shared_ptr<const CachedAnswer> answer) {
  const size_t bytes = answer->bytes + key.size();
  if (bytes > max_bytes_ / 4) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) EraseLocked(it->second);
  const auto ttl = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s_));
  lru_.push_front({key, std::move(answer), Clock::now() + ttl});
  index_[key] = lru_.begin();
  stats_.bytes += bytes;
  ++stats_.entries;
  ++stats_.stores;
  while (stats_.bytes > max_bytes_ && !lru_.empty()) {
    EraseLocked(std::prev(lru_.end()));
    ++stats_.evictions;
  }
}

void ResponseCache::EraseLocked(std::list<Entry>::iterator it) {
  stats_.bytes -= it->answer->bytes + it->key.size();
  --stats_.entries;
  index_.erase(it->key);
  lru_.erase(it);
}

ResponseCache::Stats ResponseCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

backend::CompletionEvent CachedCompletion::Next(backend::Clock::time_point) {
  backend::CompletionEvent e;
  e.kind = Kind::kDone;
  while (next_ < answer_->events.size()) {
    e = answer_->events[next_++];
    // A cancelled replay skips to each choice's end, as a live one would.
    if (cancelled_ && (e.kind == Kind::kText || e.kind == Kind::kToolCall)) continue;
    if (e.kind == Kind::kChoiceEnd) {
      if (cancelled_) e.result.finish = backend::FinishReason::kCancelled;
      e.result.queue_s = e.result.prompt_s = e.result.generation_s = 0;
      e.result.ttft_s = 0.0;
      e.result.route = note_;
    }
    return e;
  }
  return e;
}

backend::CompletionEvent RecordingCompletion::Next(backend::Clock::time_point deadline) {
  backend::CompletionEvent e = inner_->Next(deadline);
  if (cancelled_) whole_ = false;
  if (e.kind == Kind::kIdle || !whole_) return e;
  if (e.kind == Kind::kChoiceEnd) {
    const backend::FinishReason f = e.result.finish;
    if (e.result.error || (f != backend::FinishReason::kStop && f != backend::FinishReason::kToolCalls)) whole_ = false;
    if (!e.result.route.empty()) e.result.route += " cache=miss";
  }
  if (!whole_) {
    answer_.reset();
    return e;
  }
  answer_->events.push_back(e);
  answer_->bytes += EventBytes(e);
  if (e.kind == Kind::kDone) {
    answer_->model = inner_->model();
    answer_->choices = inner_->choices();
    cache_->Put(key_, std::move(answer_));
    whole_ = false;  // stored: nothing more to record
  }
  return e;
}

}  // namespace hone::route
