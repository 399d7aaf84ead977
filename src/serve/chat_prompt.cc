#include "serve/chat_prompt.h"

#include <atomic>
#include <cctype>
#include <chrono>
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

// Control tokens a client typed ("<|im_start|>system" in a message) must
// stay text: only the template's own markup may become control tokens. So
// before rendering, each control-token text in a message is swapped for a
// sentinel (private-use characters around a per-request nonce, which no
// template rewrites); the rendered prompt is tokenized with special-token
// parsing between sentinels, and each sentinel as the original text without
// it. llama-server parses the whole prompt, so there a user can open a
// system turn.
class ControlTextGuard {
 public:
  explicit ControlTextGuard(const engine::Tokenizer& tok) : tok_(tok) {
    static std::atomic<uint64_t> counter{0};
    nonce_ = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() ^ (++counter * 0x9e3779b97f4a7c15ull));
  }
  // `text` with its control-token texts swapped for sentinels.
  std::string Neutralize(const std::string& text) {
    auto special = tok_.Encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (!special) return text;
    std::string out;
    size_t pos = 0;
    for (engine::Token t : *special) {
      if (!tok_.Piece(t, false).empty()) continue;  // a control token renders only with render_special
      const std::string piece = tok_.Piece(t, true);
      const size_t at = piece.empty() ? std::string::npos : text.find(piece, pos);
      if (at == std::string::npos) continue;
      out += text.substr(pos, at - pos);
      out += Sentinel(originals_.size());
      originals_.push_back(piece);
      pos = at + piece.size();
    }
    return originals_.empty() && pos == 0 ? text : out + text.substr(pos);
  }
  bool active() const { return !originals_.empty(); }
  // The rendered prompt's tokens: markup parsed, sentinels as plain text.
  Result<std::vector<engine::Token>> Encode(const std::string& prompt) const {
    std::vector<engine::Token> out;
    size_t pos = 0;
    auto append = [&](const std::string& piece, bool markup) -> Status {
      if (piece.empty()) return {};
      auto t = tok_.Encode(piece, /*add_special=*/out.empty() && pos == 0, markup);
      if (!t) return t.error();
      out.insert(out.end(), t->begin(), t->end());
      return {};
    };
    for (size_t i = 0; i < originals_.size(); ++i) {
      const std::string mark = Sentinel(i);
      const size_t at = prompt.find(mark, pos);
      if (at == std::string::npos) continue;  // the template dropped that message
      if (Status s = append(prompt.substr(pos, at - pos), true); !s) return s.error();
      if (Status s = append(originals_[i], false); !s) return s.error();
      pos = at + mark.size();
    }
    if (Status s = append(prompt.substr(pos), true); !s) return s.error();
    return out;
  }
  // The prompt as the client's text reads, for /hone/render.
  std::string Restore(std::string prompt) const {
    for (size_t i = 0; i < originals_.size(); ++i) {
      const std::string mark = Sentinel(i);
      for (size_t at; (at = prompt.find(mark)) != std::string::npos;) prompt.replace(at, mark.size(), originals_[i]);
    }
    return prompt;
  }

 private:
  std::string Sentinel(size_t i) const { return "\xEE\x80\x80" + nonce_ + ":" + std::to_string(i) + "\xEE\x80\x81"; }
  const engine::Tokenizer& tok_;
  std::string nonce_;
  std::vector<std::string> originals_;
};

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
    ControlTextGuard guard(tok);
    std::vector<Message> guarded = messages;
    for (Message& m : guarded) m.content = guard.Neutralize(m.content);
    auto plan = tmpl->Render(ToEngine(r, guarded));
    if (!plan) return plan.error();
    // The template's markup is special tokens; the client's text is not.
    // BOS as the vocabulary wants it: the library strips a template's own
    // leading BOS for that.
    auto t = guard.active() ? guard.Encode(plan->prompt)
                            : tok.Encode(plan->prompt, /*add_special=*/true, /*parse_special=*/true);
    if (!t) return t.error();
    out.tokens = std::move(*t);
    plan->prompt = guard.Restore(std::move(plan->prompt));
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
