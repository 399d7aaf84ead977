// engine/chat: rendering and tool-call parsing through llama.cpp's chat
// library, on the synthetic Qwen2.5 (real tokenizer, Qwen2.5-Instruct template).
#include "engine/chat.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/test_env.h"

namespace hone::engine {
namespace {

std::shared_ptr<Model> Tiny() {
  auto m = Model::Load(hone::testing::TinySynthModel());
  EXPECT_TRUE(m.ok()) << m.error().ToString();
  return m.ok() ? *m : nullptr;
}

ChatInput OrderQuestion();

// A parser for the order question's plan on the tiny Qwen2.5-shaped model.
std::unique_ptr<ChatOutputParser> OrderParser() {
  auto model = Tiny();
  if (!model) return nullptr;
  auto t = ChatTemplate::ForModel(*model);
  if (!t.ok()) return nullptr;
  auto plan = (*t)->Render(OrderQuestion());
  if (!plan.ok()) return nullptr;
  return std::make_unique<ChatOutputParser>(*plan);
}

ChatInput OrderQuestion() {
  ChatInput in;
  in.turns = {{"system", "You are a support bot.", {}, "", ""}, {"user", "Where is order 42?", {}, "", ""}};
  in.tools = {{"lookup_order", "Look up an order",
               R"({"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"]})"}};
  return in;
}

TEST(ChatTemplate, ToolsRenderInQwenFormatWithALazyGrammarOnTheToolCallToken) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  auto t = ChatTemplate::ForModel(*model);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_TRUE((*t)->supports_tools());
  auto plan = (*t)->Render(OrderQuestion());
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_NE(plan->prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"lookup_order\""),
            std::string::npos)
      << plan->prompt;
  EXPECT_TRUE(plan->parse_output);
  EXPECT_TRUE(plan->grammar_lazy);
  EXPECT_FALSE(plan->grammar.empty());
  // <tool_call> is one token (151657) in Qwen2.5's vocabulary; the format's
  // trigger is the marker and its newline, two tokens, so it is a pattern.
  const Tokenizer tok(*model);
  auto ids = tok.Encode("<tool_call>\n", false, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<Token>{151657, 198}));
  EXPECT_TRUE(plan->trigger_tokens.empty());
  ASSERT_EQ(plan->trigger_patterns.size(), 1u);
  EXPECT_NE(plan->trigger_patterns[0].find("tool_call"), std::string::npos);
  EXPECT_TRUE(plan->answer_prefix.empty());
}

TEST(ChatTemplate, AForcedCallStartsWithTheMarkerAndNamesOnlyTheForcedTool) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  auto t = ChatTemplate::ForModel(*model);
  ASSERT_TRUE(t.ok());
  ChatInput in = OrderQuestion();
  in.tools.push_back({"refund", "Refund an order", R"({"type":"object"})"});
  in.tool_choice = ToolChoice::kRequired;
  in.forced_tool = "refund";
  auto plan = (*t)->Render(in);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->answer_prefix, "<tool_call>\n");
  EXPECT_TRUE(plan->prompt.ends_with("<|im_start|>assistant\n<tool_call>\n")) << plan->prompt;
  EXPECT_EQ(plan->prompt.find("lookup_order"), std::string::npos) << "only the forced tool is offered";
  EXPECT_EQ(plan->grammar_prefill, (std::vector<Token>{151657, 198}));
  in.forced_tool = "missing";
  auto bad = (*t)->Render(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

// One template is rendered from every HTTP thread at once, without a lock.
TEST(ChatTemplate, ConcurrentRendersAllGiveTheSamePrompt) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  auto t = ChatTemplate::ForModel(*model);
  ASSERT_TRUE(t.ok());
  const ChatInput in = OrderQuestion();
  auto reference = (*t)->Render(in);
  ASSERT_TRUE(reference.ok());
  std::atomic<int> same{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 10; ++k) {
        auto p = (*t)->Render(in);
        if (p.ok() && p->prompt == reference->prompt && p->grammar == reference->grammar) ++same;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(same.load(), 80);
}

TEST(ChatOutputParser, StreamedPiecesReassembleIntoContentAndOneCall) {
  std::unique_ptr<ChatOutputParser> made = OrderParser();
  ASSERT_TRUE(made);
  ChatOutputParser& parser = *made;
  const std::string out =
      "Let me check.<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": {\"order_id\": "
      "42}}\n</tool_call>";
  std::string content, args, name, id;
  int firsts = 0;
  auto take = [&](const std::vector<ChatOutputParser::Delta>& ds) {
    for (const auto& d : ds) {
      content += d.content;
      if (d.tool_index < 0) continue;
      EXPECT_EQ(d.tool_index, 0);
      if (!d.tool_name.empty()) ++firsts, name = d.tool_name, id = d.tool_id;
      args += d.arguments;
    }
  };
  for (size_t i = 0; i < out.size(); i += 3) take(parser.Push(out.substr(i, 3)));
  take(parser.Finish());
  EXPECT_EQ(content, "Let me check.");  // the marker never leaks into the text
  EXPECT_EQ(firsts, 1);
  EXPECT_EQ(name, "lookup_order");
  EXPECT_EQ(id.rfind("call_", 0), 0u) << id;
  EXPECT_EQ(nlohmann::json::parse(args), nlohmann::json::parse(R"({"order_id": 42})"));
  ASSERT_EQ(parser.tool_calls().size(), 1u);
  EXPECT_EQ(parser.tool_calls()[0].id, id);
  EXPECT_TRUE(parser.complete());
}

TEST(ChatOutputParser, PlainTextWithoutACallIsAllContent) {
  std::unique_ptr<ChatOutputParser> made = OrderParser();
  ASSERT_TRUE(made);
  ChatOutputParser& parser = *made;
  std::string content;
  for (const auto& d : parser.Push("Your order <is> on its way")) content += d.content;
  for (const auto& d : parser.Finish()) content += d.content;
  EXPECT_EQ(content, "Your order <is> on its way");
  EXPECT_TRUE(parser.tool_calls().empty());
  EXPECT_FALSE(parser.complete());
}

}  // namespace
}  // namespace hone::engine
