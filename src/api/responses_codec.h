// OpenAI's Responses API (POST /v1/responses) as a codec (see codec.h):
// `input` as a string or items (messages, function_call and
// function_call_output), `instructions`, `max_output_tokens`, function
// `tools`, `text.format` (JSON schema), streaming with the Responses event
// types (response.created, response.output_text.delta, ...,
// response.completed) and usage. Stateless: nothing is stored, so
// `previous_response_id` is refused with a 400 that says so.
#pragma once

#include "api/codec.h"

namespace hone::api::responses {

class ResponsesCodec final : public api::GenerationCodec {
 public:
  ResponsesCodec() : api::GenerationCodec(ApiFlavor::kOpenAI) {}
  Result<ParsedGeneration> Parse(const json& body) const override;
  std::string NewAnswerId() const override;
  std::string stream_content_type() const override { return "text/event-stream"; }
  std::map<std::string, std::string> stream_headers() const override {
    return {{"Cache-Control", "no-cache"}};
  }
  std::unique_ptr<StreamEncoder> NewStream(const Answer& a) const override;
  json Collected(const Answer& a, const std::vector<CollectedChoice>& choices,
                 const backend::Usage& total) const override;
};

}  // namespace hone::api::responses
