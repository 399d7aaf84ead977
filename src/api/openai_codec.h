// OpenAI's REST API as codecs (see codec.h): chat completions, completions,
// embeddings and the model list. SSE streams end with "data: [DONE]"; a
// failure mid-stream is an `error` event instead.
#pragma once

#include "api/codec.h"

namespace hone::api::openai {

// /v1/chat/completions (chat = true) and /v1/completions.
class GenerationCodec final : public api::GenerationCodec {
 public:
  explicit GenerationCodec(bool chat) : api::GenerationCodec(ApiFlavor::kOpenAI), chat_(chat) {}
  Result<ParsedGeneration> Parse(const json& body) const override;
  std::string NewAnswerId() const override;
  std::string stream_content_type() const override { return "text/event-stream"; }
  std::map<std::string, std::string> stream_headers() const override {
    return {{"Cache-Control", "no-cache"}};
  }
  std::unique_ptr<StreamEncoder> NewStream(const Answer& a) const override;
  json Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                 const backend::Usage& total) const override;

 private:
  const bool chat_;
};

// A message's tool_calls array, OpenAI's shape (also the router's upstream request).
json ToolCallsJson(const std::vector<backend::ToolCall>& calls);

// /v1/embeddings
class EmbeddingCodec final : public api::EmbeddingCodec {
 public:
  EmbeddingCodec() : api::EmbeddingCodec(ApiFlavor::kOpenAI) {}
  Result<backend::EmbeddingRequest> Parse(const json& body) const override;
  json Encode(const json& body, const backend::Embeddings& e, double seconds) const override;
};

// /v1/models
class ModelListCodec final : public api::ModelListCodec {
 public:
  ModelListCodec() : api::ModelListCodec(ApiFlavor::kOpenAI) {}
  json Encode(const std::vector<backend::ModelCard>& models) const override;
};

}  // namespace hone::api::openai
