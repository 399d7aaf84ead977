// Chat messages from a request body: the one validation both APIs use, so
// that an OpenAI and an Ollama client get the same checks.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "backend/backend.h"
#include "util/result.h"

namespace hone::api {

// `messages` must be an array of objects, each with a string role among
// system, user, assistant, developer (read as system) and tool. Content is
// absent, null, a string, or an array of part objects with a string `type`:
// text parts (a string `text`) are joined; image_url, input_audio, file and
// refusal parts are left out (this server reads text); any other content is
// a 400 naming its path ('messages[0].content', 'messages[1].content[2].type').
// An assistant message may carry `tool_calls` (OpenAI's, with arguments as a
// JSON string, or Ollama's, with an object); a tool message `tool_call_id`
// and `name` (Ollama: `tool_name`), strings.
// Errors: kInvalidArgument, naming what is wrong.
Result<std::vector<backend::Message>> ParseMessages(const nlohmann::ordered_json& messages);

}  // namespace hone::api
