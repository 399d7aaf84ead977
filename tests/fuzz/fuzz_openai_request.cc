// libFuzzer target: a request body as the OpenAI-style endpoints read it
// (chat, completions, embeddings, the Responses API) and Anthropic's Messages
// API. Whatever the bytes, parsing ends in a request or an error: never a
// crash, a hang or an exception out of the codec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/anthropic_codec.h"
#include "api/json_fields.h"
#include "api/openai_codec.h"
#include "api/responses_codec.h"

namespace {
const hone::api::openai::GenerationCodec kChat(/*chat=*/true);
const hone::api::openai::GenerationCodec kCompletions(/*chat=*/false);
const hone::api::openai::EmbeddingCodec kEmbeddings;
const hone::api::responses::ResponsesCodec kResponses;
const hone::api::anthropic::MessagesCodec kMessages;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = hone::api::ParseBody(std::string(reinterpret_cast<const char*>(data), size));
  if (!body) return 0;
  (void)kChat.Parse(*body);
  (void)kCompletions.Parse(*body);
  (void)kEmbeddings.Parse(*body);
  (void)kResponses.Parse(*body);
  (void)kMessages.Parse(*body);
  return 0;
}
