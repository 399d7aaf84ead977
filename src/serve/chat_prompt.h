// A chat request as the local engine runs it: the conversation (tool calls
// and results included) rendered with the model's own template through
// llama.cpp's chat library (engine/chat.h), tokenized, plus what the answer
// needs: the tool-call grammar and its triggers, the format's stop strings,
// and the parser that reads calls back out of the output.
//
// Models without a template (base models such as stories260K) get a plain
// "User: …\nAssistant:" transcript, and no tools.
#pragma once

#include <optional>
#include <vector>

#include "engine/chat.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "serve/contract_names.h"
#include "util/result.h"

namespace hone::serve {

struct ChatPrompt {
  std::vector<engine::Token> tokens;
  // Set when the template rendered it (always with a template): the grammar,
  // triggers and stops to apply, and the output parser's state.
  std::optional<engine::ChatPlan> plan;
};

// `tmpl` is the model's parsed template, or null when it has none.
// continue_final: the last (assistant) message is continued, not answered.
// Errors: kInvalidArgument (tools for a model without tool support, a forced
// function not in the list, a conversation the template refuses).
Result<ChatPrompt> RenderChat(const engine::Model& model, const engine::ChatTemplate* tmpl,
                              const GenerationRequest& request);

}  // namespace hone::serve
