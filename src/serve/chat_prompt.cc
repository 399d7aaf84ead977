#include "serve/chat_prompt.h"

#include <cctype>
#include <map>

namespace hone::serve {
namespace {

bool ToolsInPlay(const GenerationRequest& r) {
  return !r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone;
}

engine::ChatInput ToEngine(const GenerationRequest& r, const std::vector<Message>& messages) {
  engine::ChatInput in;
  std::map<std::string, std::string> call_names;  // id -> function, for tool turns that name none
  for (const Message& m : messages) {
    engine::ChatTurn t{m.role, m.content, {}, m.tool_call_id, m.name};
    for (const ToolCall& c : m.tool_calls) {
      t.tool_calls.push_back({c.id, c.name, c.arguments});
      call_names[c.id] = c.name;
    }
    if (t.role == "tool" && t.tool_name.empty() && call_names.count(t.tool_call_id)) {
      t.tool_name = call_names[t.tool_call_id];
    }
    in.turns.push_back(std::move(t));
  }
  for (const Tool& tool : r.tools) {
    in.tools.push_back({tool.name, tool.description, tool.parameters});
  }
  switch (r.tool_choice.mode) {
    case ToolChoice::Mode::kAuto:
      in.tool_choice = engine::ToolChoice::kAuto;
      break;
    case ToolChoice::Mode::kNone:
      in.tool_choice = engine::ToolChoice::kNone;
      break;
    case ToolChoice::Mode::kRequired:
      in.tool_choice = engine::ToolChoice::kRequired;
      in.forced_tool = r.tool_choice.function;
      break;
  }
  // One call per turn unless the client asks for more: a small model given
  // the choice tends to repeat a call until max_tokens.
  in.parallel_tool_calls = r.parallel_tool_calls.value_or(false);
  return in;
}

// A model without a template: a plain transcript, never parsing special
// tokens out of the text.
Result<std::vector<engine::Token>> Transcript(const engine::Tokenizer& tok,
                                              const std::vector<Message>& messages) {
  std::string text;
  for (const auto& m : messages) {
    std::string role = m.role.empty() ? "user" : m.role;
    role[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(role[0])));
    text += role + ": " + m.content + "\n";
  }
  text += "Assistant:";
  return tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
}

}  // namespace

Result<ChatPrompt> RenderChat(const engine::Model& model, const engine::ChatTemplate* tmpl,
                              const GenerationRequest& r) {
  engine::Tokenizer tok(model);
  // Continuing: the conversation before the partial answer, an open assistant
  // turn, then the partial answer itself as plain text (no end of turn).
  std::vector<Message> messages = r.messages;
  std::string partial;
  if (r.continue_final && !messages.empty() && messages.back().role == "assistant") {
    if (!messages.back().tool_calls.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "an assistant message with tool calls cannot be continued");
    }
    if (ToolsInPlay(r) && r.tool_choice.mode == ToolChoice::Mode::kRequired) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'continue_final_message' cannot be combined with a forced 'tool_choice'");
    }
    partial = messages.back().content;
    messages.pop_back();
  }
  ChatPrompt out;
  if (!tmpl) {
    if (ToolsInPlay(r)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       model.info().name + " has no chat template, so it cannot call tools; send no 'tools'");
    }
    auto t = Transcript(tok, messages);
    if (!t) return t.error();
    out.tokens = std::move(*t);
  } else {
    auto plan = tmpl->Render(ToEngine(r, messages));
    if (!plan) return plan.error();
    // The template's markup is special tokens; the client's text inside it
    // is tokenized the same way, as llama-server does. BOS as the vocabulary
    // wants it: the library strips a template's own leading BOS for that.
    auto t = tok.Encode(plan->prompt, /*add_special=*/true, /*parse_special=*/true);
    if (!t) return t.error();
    out.tokens = std::move(*t);
    out.plan = std::move(*plan);
  }
  if (!partial.empty()) {
    auto more = tok.Encode(partial, /*add_special=*/false, /*parse_special=*/false);
    if (!more) return more.error();
    out.tokens.insert(out.tokens.end(), more->begin(), more->end());
  }
  return out;
}

}  // namespace hone::serve
