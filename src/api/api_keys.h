// API keys as clients present them, and their comparison: what the key
// checks (RequestAuth, request_auth.h) are built on.
#pragma once

#include <string>

namespace hone::api {

// The key a request presents: `Authorization: Bearer <key>` (OpenAI, Ollama;
// the word in any case) over `x-api-key: <key>` (Anthropic's clients).
std::string PresentedKey(const std::string& authorization, const std::string& x_api_key);
// Constant time in the key's length: no early exit on the first mismatch.
bool SameKey(const std::string& a, const std::string& b);

}  // namespace hone::api
