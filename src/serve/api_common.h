// Small pieces both API translators use: JSON body parsing with precise
// errors, option readers that reject wrong types, and the loop that pumps a
// job's text to a streaming client.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "serve/errors.h"
#include "serve/http_types.h"
#include "serve/service.h"

namespace hone::serve {

using nlohmann::json;

// Parses a request body that must be a JSON object.
std::optional<json> ParseBody(const std::string& body, ApiError* err);

// Typed field readers: absent/null -> nullopt; wrong type -> *err set.
std::optional<double> GetNumber(const json& j, const char* key, ApiError* err);
std::optional<int64_t> GetInt(const json& j, const char* key, ApiError* err);
std::optional<bool> GetBool(const json& j, const char* key, ApiError* err);
std::optional<std::string> GetString(const json& j, const char* key, ApiError* err);
// A string or an array of strings (stop, input, prompt).
std::optional<std::vector<std::string>> GetStrings(const json& j, const char* key, ApiError* err);
// The sampling fields both APIs name alike (OpenAI's at the top level,
// Ollama's inside "options"): temperature top_p top_k min_p seed
// repeat_penalty repeat_last_n presence_penalty frequency_penalty. Fields left
// out keep their value; a wrong type sets *err.
void GetSampling(const json& j, engine::SamplingOptions* s, ApiError* err);

// Ollama keep_alive: a duration string or a number of seconds.
std::optional<double> GetKeepAlive(const json& j, ApiError* err);

// Streams job `i` of `run`: calls on_text for every piece; stops (and cancels
// the job) when write fails. Returns false if the client went away.
bool PumpJob(Running& run, size_t i, const ChunkWriter& write,
             const std::function<std::string(const std::string&)>& frame);

// Waits for job `i` of a non-streamed request and returns its text; cancels it
// (within a step) if the client disconnects meanwhile.
std::string WaitForJob(Running& run, size_t i);

// The answer to a client that disconnected before it: nobody reads it, but the
// log line records status 499 (nginx's "client closed request") with the job's
// tokens so far.
HttpResponse ClientClosed(RequestLog log);

// Fills the log line from a finished job.
void LogJob(const Running& run, const JobResult& r, RequestLog* log);

int64_t UnixNow();
// Serializes without throwing: invalid UTF-8 (never ours) becomes U+FFFD.
std::string Dump(const json& j);
std::string Base64(const void* data, size_t n);
std::string NewId(const char* prefix);

}  // namespace hone::serve
