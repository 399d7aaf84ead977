// Chat templates and tool calls, through llama.cpp's own chat library
// (common/chat.h, the one llama-server uses): it renders a conversation with
// the model's real Jinja template, tools and tool results included; says what
// the answer needs (a grammar for the tool calls, its lazy triggers, extra
// stop strings); and parses the raw output back into content and tool calls,
// also while it streams. hone writes no tool-call format of its own: each
// model family's format is the library's.
//
//   ChatInput ──ChatTemplate::Render──> ChatPlan (prompt, grammar, triggers, stops)
//   generated text ──ChatOutputParser::Push──> content and tool-call deltas
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "util/result.h"

struct common_chat_templates;

namespace hone::engine {

struct ChatParserState;  // chat.cc: the library's parser for one rendering

struct ToolCall {
  std::string id;  // "call_…"; the parser assigns one where the model gives none
  std::string name;
  std::string arguments;  // JSON text, as OpenAI carries it
};

struct ChatTurn {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // an assistant turn that called tools
  std::string tool_call_id;          // a tool turn: the call it answers
  std::string tool_name;             // a tool turn: the function's name, where known
};

struct ToolSpec {
  std::string name;
  std::string description;
  std::string parameters;  // JSON schema text; empty: any object
};

enum class ToolChoice { kAuto, kNone, kRequired };

struct ChatInput {
  std::vector<ChatTurn> turns;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string forced_tool;  // with kRequired: only this function may be called
  bool parallel_tool_calls = false;
  bool add_generation_prompt = true;  // end with an open assistant turn
};

// What a rendered conversation asks of generation.
struct ChatPlan {
  std::string prompt;  // the template's text: its markup becomes control tokens
  // A grammar over the answer (GBNF). Lazy: it applies only once a trigger
  // appears in the output, so plain text stays free.
  std::string grammar;
  bool grammar_lazy = false;
  std::vector<std::string> trigger_patterns;  // regular expressions
  std::vector<Token> trigger_tokens;
  // Tokens the grammar must have seen before the first generated one: the
  // template's generation prompt, or a forced call's opening marker.
  std::vector<Token> grammar_prefill;
  std::vector<Token> preserved_tokens;  // generated as text even where they are special
  std::vector<std::string> stops;       // the format's own, beside the client's
  // The answer begins with this text, already in the prompt (a forced call's
  // opening marker); the parser reads it before the generated text.
  std::string answer_prefix;
  bool parse_output = false;  // tools are in play: parse the output (ChatOutputParser)
  // One call per answer: the library's grammar allows more, so the parser
  // says when the first call is complete and generation can stop there.
  bool single_call = false;
  std::string format;                             // the library's name for the output format
  std::shared_ptr<const ChatParserState> parser;  // opaque: for ChatOutputParser
};

// A model's chat template, parsed once. Thread-safe without a lock: the
// parsed templates are read-only, and llama-server applies one such object
// from all its HTTP threads at once.
class ChatTemplate {
 public:
  // Errors: kUnsupported when the model carries no template, or one the
  // library cannot parse. `source` replaces the model's own.
  static Result<std::unique_ptr<ChatTemplate>> ForModel(const Model& model, const std::string& source = "");
  ~ChatTemplate();

  // Errors: kInvalidArgument (a conversation or tool list the template
  // refuses, a forced tool that is not in the list), kUnsupported (tools for a
  // template that has no tool support).
  Result<ChatPlan> Render(const ChatInput& input) const;
  bool supports_tools() const { return supports_tools_; }

 private:
  ChatTemplate(const Model& model) : model_(model) {}
  const Model& model_;
  std::unique_ptr<common_chat_templates, void (*)(common_chat_templates*)> templates_{nullptr, nullptr};
  bool supports_tools_ = false;
};

// Turns a growing answer into content and tool calls. Not thread-safe: one
// per choice.
class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatPlan& plan);
  ~ChatOutputParser();

  struct Delta {
    std::string content;    // more of the answer's text
    int tool_index = -1;    // >= 0: a tool-call fragment for call `tool_index`
    std::string tool_id;    // set with the first fragment of a call
    std::string tool_name;  // set with the first fragment of a call
    std::string arguments;  // more of the call's JSON arguments
  };
  // The next generated text; returns what is now certain (a partial marker is
  // held back until it is known to be text or a call).
  std::vector<Delta> Push(const std::string& text);
  // The end of the answer: a final parse releases whatever was held back.
  std::vector<Delta> Finish();
  const std::vector<ToolCall>& tool_calls() const;
  // With ChatPlan::single_call: the first call is complete; whatever comes
  // after it is ignored, and generation should stop.
  bool complete() const;

 private:
  std::vector<Delta> Parse(bool partial);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hone::engine
