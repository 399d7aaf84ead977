// libFuzzer target: a request body as Ollama's endpoints read it (/api/chat,
// /api/generate, /api/embed, /api/embeddings).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/json_fields.h"
#include "api/ollama_codec.h"

namespace {
const hone::api::ollama::GenerationCodec kChat(/*chat=*/true);
const hone::api::ollama::GenerationCodec kGenerate(/*chat=*/false);
const hone::api::ollama::EmbeddingCodec kEmbed(/*legacy=*/false);
const hone::api::ollama::EmbeddingCodec kLegacyEmbeddings(/*legacy=*/true);
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = hone::api::ParseBody(std::string(reinterpret_cast<const char*>(data), size));
  if (!body) return 0;
  (void)kChat.Parse(*body);
  (void)kGenerate.Parse(*body);
  (void)kEmbed.Parse(*body);
  (void)kLegacyEmbeddings.Parse(*body);
  return 0;
}
