// Anthropic's Messages API (POST /v1/messages) as a codec (see codec.h):
// system, messages with text, tool_use and tool_result blocks, max_tokens,
// stop_sequences, tools and tool_choice; answers with content blocks and
// stop_reason, and streams Anthropic's events (message_start,
// content_block_start/delta/stop, message_delta, message_stop). Errors use
// Anthropic's envelope ({"type": "error", "error": {...}}).
#pragma once

#include "api/codec.h"

namespace hone::api::anthropic {

class MessagesCodec final : public api::GenerationCodec {
 public:
  MessagesCodec() : api::GenerationCodec(ApiFlavor::kAnthropic) {}
  Result<ParsedGeneration> Parse(const json& body) const override;
  std::string NewAnswerId() const override;
  std::string stream_content_type() const override { return "text/event-stream"; }
  std::map<std::string, std::string> stream_headers() const override {
    return {{"Cache-Control", "no-cache"}};
  }
  std::unique_ptr<StreamEncoder> NewStream(const Answer& a) const override;
  json Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                 const backend::Usage& total) const override;
  // POST /v1/messages/count_tokens: model, system, messages, tools and
  // tool_choice as /v1/messages reads them (no max_tokens); answers
  // {"input_tokens": N}.
  Result<backend::GenerationRequest> ParsePrompt(const json& body) const override;
  json Counted(int tokens) const override { return {{"input_tokens", tokens}}; }
};

// "end_turn", "max_tokens", "tool_use", or "stop_sequence" (with the string
// in StopSequence) for how a choice ended.
const char* StopReason(const backend::ChoiceResult& r);
json StopSequence(const backend::ChoiceResult& r);

}  // namespace hone::api::anthropic
