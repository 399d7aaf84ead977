// System prompts declared shared across tenants (a route's
// `shared_system_prompts`, or [model_options.NAME]): their rendered tokens
// may be reused by every cache scope, from a slot or the prompt cache, and
// they are prefilled once when the model loads ("warmed").
//
// Everything else a slot or the cache holds stays within its scope (a
// tenant, or a cache_salt): reuse across scopes is cut at the declared
// tokens, so what another tenant can learn by timing is only whether a
// prompt the operator made public is cached.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "util/result.h"

namespace hone::serve {

// The cache scope of warmed, declared prefixes. Client scopes are a key's
// tenant ("key-…"), "salt-…", or "" on a server without keys.
inline constexpr const char* kSharedScope = "shared-prefix";

// How many tokens two sequences share from the start.
inline size_t CommonPrefix(const std::vector<engine::Token>& a, const std::vector<engine::Token>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

class SharedPrefixes {
 public:
  using Token = engine::Token;
  void Add(std::vector<Token> prefix);  // thread-safe; a prefix already held is not added twice
  bool empty() const;
  // Of the `common` tokens that `prompt` shares with another scope's tokens,
  // how many may be reused: the most it shares with a declared prefix, at
  // most `common`. Thread-safe.
  size_t Reusable(const std::vector<Token>& prompt, size_t common) const;

 private:
  mutable std::mutex mu_;  // guards prefixes_
  std::vector<std::vector<Token>> prefixes_;
};

// The tokens every chat with `system` as its system message starts with,
// under the model's template: the common prefix of the template's renderings
// with several different user turns (a template may fold the first user
// words into a token with what comes before). Errors: kInvalidArgument (an
// empty prompt, one the template refuses, or one that shares no tokens).
Result<std::vector<engine::Token>> SystemPromptPrefix(const engine::Model& model,
                                                      const engine::ChatTemplate* tmpl,
                                                      const std::string& system);

class LoadedModel;
// Each prompt's prefix, declared shared on the model's scheduler and warmed.
// Errors: the first prompt SystemPromptPrefix refused (the others still apply).
Status WarmSharedPrompts(LoadedModel& m, const std::vector<std::string>& prompts);

}  // namespace hone::serve
