#include "engine/chat.h"

#include <llama.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

// llama.cpp's common library (angle brackets: not engine/chat.h beside this file)
#include <chat.h>
#include <common.h>

namespace hone::engine {

// The library's parser for one rendered conversation, shared by its choices.
struct ChatParserState {
  common_chat_parser_params params;
};

namespace {

common_chat_msg ToLibrary(const ChatTurn& t) {
  common_chat_msg m;
  m.role = t.role;
  m.content = t.content;
  for (const auto& c : t.tool_calls) m.tool_calls.push_back({c.name, c.arguments, c.id});
  m.tool_call_id = t.tool_call_id;
  m.tool_name = t.tool_name;
  return m;
}

common_chat_tool ToLibrary(const ToolSpec& t) {
  return {t.name, t.description, t.parameters.empty() ? std::string(R"({"type":"object"})") : t.parameters};
}

// A single token, or nothing when the text takes several.
std::optional<Token> SingleToken(const Tokenizer& tok, const std::string& text) {
  auto ids = tok.Encode(text, /*add_special=*/false, /*parse_special=*/true);
  if (!ids || ids->size() != 1) return std::nullopt;
  return ids->front();
}

// What common_sampler_init does with a template's triggers, for hone's sampler.
void AddTriggers(const Tokenizer& tok, const common_chat_params& p, ChatPlan* plan) {
  for (const auto& tr : p.grammar_triggers) {
    switch (tr.type) {
      case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:
        plan->trigger_tokens.push_back(tr.token);
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
        // A word that is one preserved token triggers on the token itself.
        auto t = SingleToken(tok, tr.value);
        if (t && std::find(plan->preserved_tokens.begin(), plan->preserved_tokens.end(), *t) !=
                     plan->preserved_tokens.end()) {
          plan->trigger_tokens.push_back(*t);
        } else {
          plan->trigger_patterns.push_back(regex_escape(tr.value));
        }
        break;
      }
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:
        plan->trigger_patterns.push_back(tr.value);
        break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
        const std::string& v = tr.value;
        std::string anchored = "^$";
        if (!v.empty()) anchored = (v.front() != '^' ? "^" : "") + v + (v.back() != '$' ? "$" : "");
        plan->trigger_patterns.push_back(anchored);
        break;
      }
    }
  }
}

// The generation prompt as the grammar must see it (common_sampler_init's
// prefill): a leading space some tokenizers add before a special token is not part of it.
std::vector<Token> PrefillTokens(const Tokenizer& tok, const std::string& text) {
  std::vector<Token> out;
  auto ids = tok.Encode(text, false, true);
  if (!ids) return out;
  for (size_t i = 0; i < ids->size(); ++i) {
    const std::string piece = tok.Piece((*ids)[i], /*render_special=*/true);
    if (i == 0 && !piece.empty() && std::isspace(static_cast<unsigned char>(piece[0])) && !text.empty() &&
        !std::isspace(static_cast<unsigned char>(text[0]))) {
      continue;
    }
    out.push_back((*ids)[i]);
  }
  return out;
}

std::string NewCallId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof kAlnum - 1)];
  return id;
}

}  // namespace

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::ForModel(const Model& model, const std::string& source) {
  if (source.empty() && model.info().chat_template.empty()) {
    return MakeError(ErrorCode::kUnsupported, model.info().name + " has no chat template");
  }
  std::unique_ptr<ChatTemplate> t(new ChatTemplate(model));
  try {
    t->templates_ = {common_chat_templates_init(model.raw(), source).release(), common_chat_templates_free};
    auto caps = common_chat_templates_get_caps(t->templates_.get());
    t->supports_tools_ = caps["supports_tools"] && caps["supports_tool_calls"];
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kUnsupported,
                     "the chat template of " + model.info().name + " does not parse: " + e.what());
  }
  return t;
}

ChatTemplate::~ChatTemplate() = default;

Result<ChatPlan> ChatTemplate::Render(const ChatInput& input) const {
  const Tokenizer tok(model_);
  common_chat_templates_inputs in;
  in.use_jinja = true;
  in.add_generation_prompt = input.add_generation_prompt;
  in.parallel_tool_calls = input.parallel_tool_calls;
  for (const auto& t : input.turns) in.messages.push_back(ToLibrary(t));
  for (const auto& t : input.tools) {
    if (input.forced_tool.empty() || t.name == input.forced_tool) in.tools.push_back(ToLibrary(t));
  }
  if (!input.forced_tool.empty() && in.tools.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'tool_choice' names the function '" + input.forced_tool + "', which is not in 'tools'");
  }
  const bool calls_allowed = !in.tools.empty() && input.tool_choice != ToolChoice::kNone;
  if (calls_allowed && !supports_tools_) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the chat template of " + model_.info().name + " has no tool support; send no 'tools'");
  }
  const bool forced = calls_allowed && input.tool_choice == ToolChoice::kRequired;
  in.tool_choice =
      input.tool_choice == ToolChoice::kNone ? COMMON_CHAT_TOOL_CHOICE_NONE : COMMON_CHAT_TOOL_CHOICE_AUTO;
  common_chat_params p;
  try {
    p = common_chat_templates_apply(templates_.get(), in);
    // A forced call: the format's opening marker starts the answer (below).
    // Without a marker to start with, the library's own "required" grammar.
    const bool has_word = std::any_of(p.grammar_triggers.begin(), p.grammar_triggers.end(),
                                      [](auto& t) { return t.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD; });
    if (forced && !(p.grammar_lazy && has_word)) {
      in.tool_choice = COMMON_CHAT_TOOL_CHOICE_REQUIRED;
      p = common_chat_templates_apply(templates_.get(), in);
    }
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("the chat template refused the conversation: ") + e.what());
  }

  ChatPlan plan;
  plan.prompt = p.prompt;
  plan.grammar = calls_allowed ? p.grammar : "";
  plan.grammar_lazy = p.grammar_lazy;
  plan.stops = p.additional_stops;
  plan.format = common_chat_format_name(p.format);
  plan.parse_output = calls_allowed;
  plan.single_call = calls_allowed && !input.parallel_tool_calls;
  for (const auto& s : p.preserved_tokens) {
    if (auto t = SingleToken(tok, s)) plan.preserved_tokens.push_back(*t);
  }
  if (!plan.grammar.empty()) {
    AddTriggers(tok, p, &plan);
    if (forced && plan.grammar_lazy) {
      // Why not the library's "required" grammar: it lets free text come
      // first, and a model that never writes the marker (small or untrained
      // ones) runs to max_tokens without a call. Starting the answer with the
      // marker and firing the lazy grammar on it makes the call certain.
      for (const auto& t : p.grammar_triggers) {
        if (t.type != COMMON_GRAMMAR_TRIGGER_TYPE_WORD) continue;
        plan.answer_prefix = t.value;
        break;
      }
      plan.prompt += plan.answer_prefix;
      auto ids = tok.Encode(plan.answer_prefix, false, true);
      if (ids) plan.grammar_prefill = *ids;
    } else if (!plan.grammar_lazy) {
      plan.grammar_prefill = PrefillTokens(tok, p.generation_prompt);
    }
  }
  auto state = std::make_shared<ChatParserState>();
  state->params = common_chat_parser_params(p);
  try {
    if (!p.parser.empty()) state->params.parser.load(p.parser);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("the chat output parser does not load: ") + e.what());
  }
  plan.parser = std::move(state);
  return plan;
}

struct ChatOutputParser::State {
  std::shared_ptr<const ChatParserState> parser;
  std::string text;  // everything generated so far, after the answer prefix
  common_chat_msg msg;
  std::vector<std::string> ids;  // one per tool call, stable across parses
  std::vector<bool> announced;   // the call's id and name went out
  std::vector<ToolCall> calls;
  bool single_call = false;
  bool complete = false;
};

ChatOutputParser::ChatOutputParser(const ChatPlan& plan) : state_(std::make_unique<State>()) {
  state_->parser = plan.parser;
  state_->text = plan.answer_prefix;
  state_->single_call = plan.single_call;
}

ChatOutputParser::~ChatOutputParser() = default;

std::vector<ChatOutputParser::Delta> ChatOutputParser::Push(const std::string& text) {
  State& s = *state_;
  if (s.complete) return {};
  s.text += text;
  std::vector<Delta> out = Parse(/*partial=*/true);
  // The first call's arguments are a whole JSON object: nothing the model
  // writes after it can change the call (the grammar allows only its closing
  // marker, or more calls).
  if (s.single_call && !s.msg.tool_calls.empty() && nlohmann::json::accept(s.msg.tool_calls[0].arguments)) {
    s.complete = true;
  }
  return out;
}

std::vector<ChatOutputParser::Delta> ChatOutputParser::Finish() {
  if (state_->complete) return {};
  return Parse(/*partial=*/false);
}

bool ChatOutputParser::complete() const { return state_->complete; }

const std::vector<ToolCall>& ChatOutputParser::tool_calls() const { return state_->calls; }

std::vector<ChatOutputParser::Delta> ChatOutputParser::Parse(bool partial) {
  State& s = *state_;
  common_chat_msg next;
  try {
    next = common_chat_parse(s.text, partial, s.parser->params);
  } catch (const std::exception&) {
    // The answer ended inside a call (max_tokens) or strayed from the format:
    // keep what the lenient partial parse recovers.
    try {
      next = common_chat_parse(s.text, /*is_partial=*/true, s.parser->params);
    } catch (const std::exception&) {
      return {};
    }
  }
  if (next.empty() && partial) return {};
  next.set_tool_call_ids(s.ids, NewCallId);
  std::vector<common_chat_msg_diff> diffs;
  try {
    diffs = common_chat_msg_diff::compute_diffs(s.msg, next);
  } catch (const std::exception&) {
    return {};  // a parse that took back what an earlier one gave: wait for the next
  }
  std::vector<Delta> out;
  for (auto& d : diffs) {
    Delta o;
    o.content = std::move(d.content_delta);
    if (d.tool_call_index != std::string::npos) {
      const size_t i = d.tool_call_index;
      if (s.announced.size() <= i) s.announced.resize(i + 1, false);
      if (!s.announced[i]) {
        if (next.tool_calls[i].name.empty()) continue;  // the name is not known yet
        o.tool_id = next.tool_calls[i].id;
        o.tool_name = next.tool_calls[i].name;
        o.arguments = next.tool_calls[i].arguments;  // all of it: nothing went out before
        s.announced[i] = true;
      } else {
        o.arguments = std::move(d.tool_call_delta.arguments);
      }
      o.tool_index = static_cast<int>(i);
    }
    if (o.content.empty() && o.tool_index < 0) continue;
    out.push_back(std::move(o));
  }
  s.msg = std::move(next);
  s.calls.clear();
  for (const auto& c : s.msg.tool_calls) s.calls.push_back({c.id, c.name, c.arguments});
  return out;
}

}  // namespace hone::engine
