#include "serve/shared_prefixes.h"

#include <algorithm>

#include "serve/chat_prompt.h"
#include "serve/model_pool.h"

namespace hone::serve {
void SharedPrefixes::Add(std::vector<Token> prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(prefixes_.begin(), prefixes_.end(), prefix) != prefixes_.end()) return;
  prefixes_.push_back(std::move(prefix));
}

bool SharedPrefixes::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prefixes_.empty();
}

size_t SharedPrefixes::Reusable(const std::vector<Token>& prompt, size_t common) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t best = 0;
  for (const auto& p : prefixes_) best = std::max(best, std::min(common, CommonPrefix(p, prompt)));
  return best;
}

Result<std::vector<engine::Token>> SystemPromptPrefix(const engine::Model& model,
                                                      const engine::ChatTemplate* tmpl,
                                                      const std::string& system) {
  if (system.empty()) return MakeError(ErrorCode::kInvalidArgument, "a shared system prompt is empty");
  // Different first letters, scripts and lengths: whatever a template or the
  // tokenizer joins across the boundary differs between them.
  static const char* const kProbes[] = {"a", "Hello, how are you?", "你好", "1"};
  std::vector<engine::Token> prefix;
  bool first = true;
  for (const char* probe : kProbes) {
    GenerationRequest r;
    r.chat = true;
    r.messages = {Message("system", system), Message("user", probe)};
    auto p = RenderChat(model, tmpl, r);
    if (!p) return MakeError(ErrorCode::kInvalidArgument, "a shared system prompt: " + p.error().message);
    if (first) {
      prefix = std::move(p->tokens);
      first = false;
    } else {
      prefix.resize(CommonPrefix(prefix, p->tokens));
    }
  }
  if (prefix.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "a shared system prompt renders to no common tokens");
  }
  return prefix;
}

Status WarmSharedPrompts(LoadedModel& m, const std::vector<std::string>& prompts) {
  Status first = Status::Ok();
  for (const std::string& system : prompts) {
    auto prefix = SystemPromptPrefix(*m.model, m.chat.get(), system);
    if (!prefix) {
      if (first) first = prefix.error();
      continue;
    }
    m.scheduler->ShareSystemPrefix(std::move(*prefix));
  }
  return first;
}

}  // namespace hone::serve
