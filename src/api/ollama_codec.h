// Ollama's REST API (/api/...) as codecs (see codec.h): chat, generate, embed,
// the legacy embeddings and the model list (tags). Streams NDJSON by default,
// reports Ollama's final statistics in nanoseconds, and honours keep_alive (a
// duration; 0 unloads; negative keeps forever). Ollama answers one choice.
#pragma once

#include <ctime>

#include "api/codec.h"

namespace hone::api::ollama {

// /api/chat (chat = true) and /api/generate.
class GenerationCodec final : public api::GenerationCodec {
 public:
  explicit GenerationCodec(bool chat) : api::GenerationCodec(ApiFlavor::kOllama), chat_(chat) {}
  Result<ParsedGeneration> Parse(const json& body) const override;
  std::string stream_content_type() const override { return "application/x-ndjson"; }
  std::unique_ptr<StreamEncoder> NewStream(const Answer& a) const override;
  json Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                 const backend::Usage& total) const override;
  json Loaded(const std::string& model, bool unloaded) const override;

  // One frame: a text piece (done = false) or the start of the final one.
  json Piece(const std::string& model, const std::string& text, bool done) const;
  json Final(const Answer& a, const std::string& text, const backend::ChoiceResult& r) const;

 private:
  const bool chat_;
};

// /api/embed (legacy = false) and /api/embeddings (one prompt, one vector).
class EmbeddingCodec final : public api::EmbeddingCodec {
 public:
  explicit EmbeddingCodec(bool legacy) : api::EmbeddingCodec(ApiFlavor::kOllama), legacy_(legacy) {}
  Result<backend::EmbeddingRequest> Parse(const json& body) const override;
  json Encode(const json& body, const backend::Embeddings& e, double seconds) const override;

 private:
  const bool legacy_;
};

// /api/tags
class ModelListCodec final : public api::ModelListCodec {
 public:
  ModelListCodec() : api::ModelListCodec(ApiFlavor::kOllama) {}
  json Encode(const std::vector<backend::ModelCard>& models) const override;
};

// Shared with the local-model endpoints (ollama_local.h).
std::string Rfc3339(std::time_t t);
json DetailsJson(const backend::ModelCard::Details& d);
int64_t Ns(double seconds);

}  // namespace hone::api::ollama
