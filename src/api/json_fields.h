// Reading request bodies: JSON parsing with precise errors and field readers
// that reject wrong types, for every codec. Every error is kInvalidArgument.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "util/result.h"

namespace hone::api {

using json = nlohmann::ordered_json;  // keys in the client's order (codec.h)

// A request body that must be a JSON object, at most kMaxJsonDepth deep and
// with at most kMaxJsonObjectKeys keys per object (400 naming the limit).
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxJsonObjectKeys = 1024;
Result<json> ParseBody(const std::string& body);

// A field's value when it has the type, else the default: for fields read
// where a wrong type is not worth its own error (json::value throws on one).
std::string StringOr(const json& j, const char* key, const std::string& otherwise = "");
bool BoolOr(const json& j, const char* key, bool otherwise);

// Typed field readers: absent/null -> nullopt; wrong type -> *err set (a
// later wrong field overwrites an earlier one).
std::optional<double> GetNumber(const json& j, const char* key, Status* err);
std::optional<int64_t> GetInt(const json& j, const char* key, Status* err);
// An integer that fits an int (max_tokens, top_k, ...): larger is an error, not a wrap.
std::optional<int> GetInt32(const json& j, const char* key, Status* err);
std::optional<bool> GetBool(const json& j, const char* key, Status* err);
std::optional<std::string> GetString(const json& j, const char* key, Status* err);
// The same for a field inside the body, its error naming the whole path:
// GetStringAt(m, "messages[2]", "role", &err) -> "'messages[2].role' must be a string".
std::optional<std::string> GetStringAt(const json& j, const std::string& path, const char* key, Status* err);
// "messages" and 2 -> "messages[2]".
std::string Indexed(const std::string& path, size_t i);
// A string the request must have: absent -> kInvalidArgument `missing`.
Result<std::string> RequireString(const json& j, const char* key, const char* missing);
// A string or an array of strings (stop, input, prompt), at most
// MaxEntries(key) of them; an entry of another type is named ('prompt[1]').
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxPrompts = 64;
constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's own
constexpr size_t kMaxMessages = 4096;
size_t MaxEntries(const std::string& key);
std::optional<std::vector<std::string>> GetStrings(const json& j, const char* key, Status* err);
// The sampling fields both APIs name alike (OpenAI's at the top level,
// Ollama's inside "options"): temperature top_p top_k min_p seed
// repeat_penalty repeat_last_n presence_penalty frequency_penalty. Fields left
// out keep their value; a wrong type sets *err.
void GetSampling(const json& j, backend::Sampling* s, Status* err);
// keep_alive: a duration string ("5m", Ollama's format) or a number of seconds.
std::optional<double> GetKeepAlive(const json& j, Status* err);

Error BadRequest(const std::string& message);  // kInvalidArgument

// Serializes without throwing: invalid UTF-8 (never ours) becomes U+FFFD.
std::string Dump(const json& j);
std::string Base64(const void* data, size_t n);
std::string NewId(const char* prefix, char sep = '-');  // "chatcmpl-…", "req-…", "msg_…"
int64_t UnixNow();

}  // namespace hone::api
