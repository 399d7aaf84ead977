// A codec is one API flavour's wire format for one kind of endpoint: it parses
// a JSON body into the neutral request of backend/backend.h and encodes what
// comes back (text chunks, tool calls, the end of a choice, the final frame,
// usage, errors). It holds no request state and drives nothing: waiting, streaming,
// cancellation, logging and failure handling are the driver's (driver.h), the
// same for every codec.
//
// Codecs are stateless and const; the server keeps one of each for its whole
// life, and streams may refer to them until they end.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/http_types.h"
#include "backend/backend.h"
#include "util/result.h"

namespace hone::api {

// Request and response bodies keep their keys in order: a tool's schema reaches
// the template as the client wrote it (llama-server does the same).
using json = nlohmann::ordered_json;

class Codec {
 public:
  explicit Codec(ApiFlavor flavor) : flavor_(flavor) {}
  virtual ~Codec() = default;
  ApiFlavor flavor() const { return flavor_; }
  HttpResponse Fail(const Error& e) const { return ErrorResponse(e, flavor_); }

 private:
  ApiFlavor flavor_;
};

// What a request asks beyond the backend request itself.
struct ParsedGeneration {
  backend::GenerationRequest request;
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  // hone's stream_options.include_route: the last chunk of each choice names
  // the route's note (route, target, attempts, overflow), as the console shows.
  bool include_route = false;
  bool load_only = false;  // Ollama: no prompt, only load (keep_alive 0: unload) the model
  json echo;               // request fields the answer repeats (the Responses API's)
};

// What every frame of one answer shares.
struct Answer {
  std::string id;  // OpenAI's "chatcmpl-…"; empty for Ollama
  int64_t created = 0;
  std::string model;
  double load_seconds = 0;
  backend::Clock::time_point start;  // once the request was queued
  bool include_usage = false;
  bool include_route = false;
  json echo;  // ParsedGeneration::echo
};

struct CollectedChoice {
  std::string text;
  std::vector<backend::ToolCall> tool_calls;  // assembled from the stream's pieces
  backend::ChoiceResult result;
};

// The frames of one streamed answer. A codec makes one per stream, so an
// encoder may keep what its API's events need (block indices, sequence
// numbers, calls seen so far). An empty string writes nothing.
class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  virtual std::string Begin() { return ""; }  // before the first choice
  virtual std::string ChoiceStart(size_t choice) { return ""; }
  virtual std::string Text(size_t choice, const std::string& text) = 0;
  virtual std::string ToolCall(size_t choice, const backend::ToolCallDelta& d) { return ""; }
  virtual std::string ChoiceEnd(size_t choice, const backend::ChoiceResult& r) = 0;
  virtual std::string End(const backend::Usage& total) = 0;
  // A failure after the stream began (headers are gone): an error frame.
  virtual std::string Failure(const Error& e) = 0;
};

// Chat and completions (OpenAI), chat and generate (Ollama).
class GenerationCodec : public Codec {
 public:
  using Codec::Codec;
  // Errors: kInvalidArgument.
  virtual Result<ParsedGeneration> Parse(const json& body) const = 0;
  virtual std::string NewAnswerId() const { return ""; }

  // Streaming: the content type and headers, then one encoder per stream.
  virtual std::string stream_content_type() const = 0;
  virtual std::map<std::string, std::string> stream_headers() const { return {}; }
  virtual std::unique_ptr<StreamEncoder> NewStream(const Answer& a) const = 0;

  // Not streamed: the whole answer.
  virtual json Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                         const backend::Usage& total) const = 0;
  // The answer to a load_only request.
  virtual json Loaded(const std::string& model, bool unloaded) const { return json::object(); }

  // A token count (Anthropic's count_tokens): the part of a body that makes
  // the prompt, and the answer with its count. APIs without one answer 404.
  virtual Result<backend::GenerationRequest> ParsePrompt(const json& body) const {
    return MakeError(ErrorCode::kNotFound, "this API has no token count endpoint");
  }
  virtual json Counted(int tokens) const { return {{"tokens", tokens}}; }
};

class EmbeddingCodec : public Codec {
 public:
  using Codec::Codec;
  virtual Result<backend::EmbeddingRequest> Parse(const json& body) const = 0;
  // `body` is the request, for options that shape the answer (encoding_format).
  virtual json Encode(const json& body, const backend::Embeddings& e, double seconds) const = 0;
};

class ModelListCodec : public Codec {
 public:
  using Codec::Codec;
  virtual json Encode(const std::vector<backend::ModelCard>& models) const = 0;
};

}  // namespace hone::api
