#include "quant/eval_suite.h"

#include <gtest/gtest.h>

#include <set>

#include "testing/test_env.h"

namespace hone::quant {
namespace {

EvalCheck Check(const std::string& json_line) {
  auto s = ParseEvalSuite(R"({"prompt": "p", "check": )" + json_line + "}", "t");
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? s->front().check : EvalCheck{};
}

TEST(EvalSuite, BadLineIsNamed) {
  const std::string text =
      "# comment\n{\"prompt\": \"a\", \"check\": {\"type\": \"contains\", \"value\": \"x\"}}\n\n"
      "{\"prompt\": \"b\", \"check\": {\"type\": \"nope\"}}\n";
  auto s = ParseEvalSuite(text, "suite.jsonl");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("suite.jsonl:4:"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("nope"), std::string::npos);
  auto bad_json =
      ParseEvalSuite("{\"prompt\": \"a\", \"check\": {\"type\": \"quatrain\"}}\n{oops\n", "x.jsonl");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.error().message.find("x.jsonl:2: not a JSON object"), std::string::npos);
  auto no_check = ParseEvalSuite("{\"prompt\": \"a\"}", "y.jsonl");
  ASSERT_FALSE(no_check.ok());
  EXPECT_NE(no_check.error().message.find("y.jsonl:1: missing \"check\""), std::string::npos);
  EXPECT_FALSE(ParseEvalSuite("\n# only comments\n", "z").ok());
}

TEST(EvalSuite, Checkers) {
  EXPECT_TRUE(RunCheck(Check(R"({"type":"contains","any":["Paris","paris"]})"), "It is paris.").pass);
  EXPECT_FALSE(RunCheck(Check(R"({"type":"contains","value":"北京"})"), "上海").pass);
  EXPECT_TRUE(RunCheck(Check(R"({"type":"regex","pattern":"H(2|₂)O"})"), "water is H2O").pass);
  EXPECT_TRUE(RunCheck(Check(R"({"type":"exact","value":"Carl"})"), "  Carl\n").pass);
  EXPECT_FALSE(RunCheck(Check(R"({"type":"exact","value":"Carl"})"), "Carl.").pass);
  EXPECT_TRUE(RunCheck(Check(R"({"type":"number","value":10})"), "There are 10 apples").pass);
  EXPECT_FALSE(RunCheck(Check(R"({"type":"number","value":10})"), "There are 12 apples").pass);
  EXPECT_TRUE(RunCheck(Check(R"({"type":"number","value":3.14,"tolerance":0.01})"), "pi ~ 3.141").pass);
  EXPECT_FALSE(RunCheck(Check(R"({"type":"number","value":1})"), "none").pass);
}

TEST(EvalSuite, CompilesRunsTheCompiler) {
  EvalCheck c = Check(R"({"type":"compiles","lang":"c"})");
  EXPECT_TRUE(RunCheck(c, "Here:\n```c\nint add(int a, int b) { return a + b; }\n```\n").pass);
  EXPECT_FALSE(RunCheck(c, "```c\nint add(int a, int b) { return a + ; }\n```").pass);
  EXPECT_FALSE(RunCheck(c, "").pass);
  EvalCheck py = Check(R"({"type":"compiles","lang":"python"})");
  EXPECT_TRUE(RunCheck(py, "```python\ndef reverse(s):\n    return s[::-1]\n```").pass);
  EXPECT_FALSE(RunCheck(py, "```python\ndef reverse(s)\n    return s\n```").pass);
}

TEST(EvalSuite, QuatrainForm) {
  std::string why;
  EXPECT_TRUE(IsFiveCharQuatrain("床前明月光，\n疑是地上霜。\n举头望明月，\n低头思故乡。", &why)) << why;
  EXPECT_TRUE(IsFiveCharQuatrain("床前明月光，疑是地上霜。举头望明月，低头思故乡。", &why)) << why;
  EXPECT_FALSE(IsFiveCharQuatrain("朝辞白帝彩云间，千里江陵一日还。两岸猿声啼不住，轻舟已过万重山。", &why));
  EXPECT_NE(why.find("7"), std::string::npos) << why;
  EXPECT_FALSE(IsFiveCharQuatrain("床前明月光", &why));
}

TEST(EvalSuite, DefaultSuiteCoversFiveKindsInTwoLanguages) {
  auto s = LoadEvalSuite(testing::SourceDir() + "/evals/default.jsonl");
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::set<std::string> kinds, langs;
  for (const auto& it : *s) {
    kinds.insert(it.kind);
    langs.insert(it.lang);
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"knowledge", "reasoning", "writing", "code", "translation"}));
  EXPECT_EQ(langs, (std::set<std::string>{"en", "zh"}));
}

}  // namespace
}  // namespace hone::quant
