// The JSON-schema-to-GBNF converter: every grammar it writes must parse in
// llama.cpp's grammar parser (checked through the engine's Sampler on a real
// vocabulary), and what it cannot honour is a clear error.
#include "serve/json_grammar.h"

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/sampler.h"
#include "testing/test_env.h"

namespace hone::serve {
namespace {

class JsonGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = engine::Model::Load(hone::testing::SharedModel("stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    model_ = *m;
  }
  static void TearDownTestSuite() { model_.reset(); }

  // The grammar for `schema`, checked to parse in llama.cpp.
  std::string Grammar(const char* schema) {
    auto g = JsonSchemaGrammar(nlohmann::json::parse(schema));
    EXPECT_TRUE(g.ok()) << g.error().ToString();
    if (!g.ok()) return "";
    engine::SamplingOptions o;
    o.grammar = *g;
    auto s = engine::Sampler::Create(*model_, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().ToString()) << "\n" << *g;
    return *g;
  }
  std::string Error(const char* schema) {
    auto g = JsonSchemaGrammar(nlohmann::json::parse(schema));
    return g.ok() ? "" : g.error().message;
  }

  static std::shared_ptr<engine::Model> model_;
};
std::shared_ptr<engine::Model> JsonGrammarTest::model_;

TEST_F(JsonGrammarTest, RecursiveLocalReferencesBecomeNamedRules) {
  std::string g = Grammar(R"({"$defs":{"node":{"type":"object","properties":{
      "name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},
      "$ref":"#/$defs/node"})");
  EXPECT_NE(g.find("\"\\\"children\\\"\""), std::string::npos) << g;
}

TEST_F(JsonGrammarTest, AlternativesTypeListsAndLengthsParse) {
  std::string g = Grammar(R"({"type":"object","properties":{
      "id":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":8}]},
      "tag":{"oneOf":[{"const":"a"},{"enum":["b","c"]}]},
      "note":{"type":["string","null"]},
      "list":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3}}})");
  EXPECT_NE(g.find("char{0,8}"), std::string::npos) << g;
  EXPECT_NE(g.find("integer | "), std::string::npos) << g;
}

TEST_F(JsonGrammarTest, OptionalPropertiesMayBeLeftOut) {
  std::string g = Grammar(R"({"type":"object","required":["b"],"properties":{
      "a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})");
  // "a" optional before the first required "b", "c" optional after it.
  EXPECT_NE(g.find("(\"\\\"a\\\"\" ws \":\" ws integer \",\" ws \"\\\"b\\\"\""), std::string::npos) << g;
  EXPECT_NE(g.find("(\",\" ws \"\\\"c\\\"\" ws \":\" ws integer)?"), std::string::npos) << g;
  // Nothing required: the empty object is allowed too.
  Grammar(R"({"type":"object","required":[],"properties":{"a":{"type":"integer"}}})");
}

TEST_F(JsonGrammarTest, WhatCannotBeHonouredIsAClearError) {
  EXPECT_NE(Error(R"({"$ref":"https://example.com/schema.json"})").find("only local $ref"),
            std::string::npos);
  EXPECT_NE(Error(R"({"$ref":"#/$defs/missing"})").find("points nowhere"), std::string::npos);
  EXPECT_NE(Error(R"({"type":"object","properties":{"x":false}})").find("can never be satisfied"),
            std::string::npos);
  EXPECT_NE(Error(R"({"type":"string","maxLength":"long"})").find("JSON schema"), std::string::npos);
  EXPECT_NE(Error(R"([1,2])").find("must be an object"), std::string::npos);
  // Found by fuzz_json_schema: a length past int was undefined behaviour (UBSan).
  EXPECT_NE(Error(R"({"type":"string","maxLength":2555555555555})").find("'maxLength' must be an integer from 0 to 4096"),
            std::string::npos);
  EXPECT_NE(Error(R"({"type":"array","minItems":-1})").find("'minItems' must be an integer"), std::string::npos);
  EXPECT_NE(Error(R"({"type":"array","minItems":1.5})").find("'minItems' must be an integer"), std::string::npos);
  EXPECT_NE(Error(R"({"type":"string","minLength":5,"maxLength":2})").find("larger than 'maxLength'"),
            std::string::npos);
}

std::string NestedObjects(int depth) {
  std::string s = R"({"type":"string"})";
  for (int i = 0; i < depth; ++i) s = R"({"type":"object","properties":{"a":)" + s + "}}";
  return s;
}

std::string NestedTypeLists(int depth) {
  // Linear in depth as text; each level's three types each expand the level below.
  std::string s = R"({"type":["string","number","null"]})";
  for (int i = 0; i < depth; ++i) s = R"({"type":["object","object","object"],"properties":{"a":)" + s + "}}";
  return s;
}

TEST_F(JsonGrammarTest, DepthExpansionAndSizeAreBounded) {
  Grammar(NestedObjects(60).c_str());
  EXPECT_NE(Error(NestedObjects(65).c_str()).find("nested more than 64 levels deep"), std::string::npos);
  // 20,000 levels would overflow the stack of an unbounded converter.
  EXPECT_NE(Error(NestedObjects(20000).c_str()).find("nested more than 64"), std::string::npos);
  // Type lists revisit their subschema: 3^12 expansions of this one.
  const std::string expansion = Error(NestedTypeLists(12).c_str());
  EXPECT_TRUE(expansion.find("subschemas to expand") != std::string::npos ||
              expansion.find("larger than 256 KiB") != std::string::npos)
      << expansion;
  Grammar(NestedTypeLists(3).c_str());
  // Many properties: the grammar grows linearly (each long tail is a named rule).
  std::string wide = R"({"type":"object","properties":{)";
  for (int i = 0; i < 2000; ++i) wide += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"integer"})";
  wide += "}}";
  std::string g = Grammar(wide.c_str());
  EXPECT_LT(g.size(), 200u << 10) << g.size();
  std::string wider = R"({"type":"object","properties":{)";
  for (int i = 0; i < 9000; ++i) wider += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"integer"})";
  wider += "}}";
  EXPECT_NE(Error(wider.c_str()).find("larger than 256 KiB"), std::string::npos);
}

TEST_F(JsonGrammarTest, TheParseCheckItselfCatchesABrokenGrammar) {
  engine::SamplingOptions o;
  o.grammar = "root ::= undefined-rule";
  EXPECT_FALSE(engine::Sampler::Create(*model_, o).ok());
}

}  // namespace
}  // namespace hone::serve
