#include "serve/json_grammar.h"

#include <vector>

namespace hone::serve {
namespace {

// Shared rules, after llama.cpp's grammars/json.gbnf. Whitespace is bounded so
// a model cannot stall in an endless run of spaces.
const char* kCommon = R"(value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
integer ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ws
boolean ::= ("true" | "false") ws
null ::= "null" ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

std::string Literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

class Builder {
 public:
  std::vector<std::string> rules;
  // Returns the name of a rule (or an inline expression) matching `schema`.
  std::string Visit(const nlohmann::json& schema) {
    if (!schema.is_object()) return "value";
    if (schema.contains("const")) return "(" + Literal(schema["const"].dump()) + " ws)";
    if (schema.contains("enum") && schema["enum"].is_array()) {
      std::string alt;
      for (const auto& v : schema["enum"]) alt += (alt.empty() ? "" : " | ") + Literal(v.dump());
      return alt.empty() ? "value" : "((" + alt + ") ws)";
    }
    std::string type =
        schema.contains("type") && schema["type"].is_string() ? schema["type"].get<std::string>() : "";
    if (type == "object" && schema.contains("properties") && schema["properties"].is_object())
      return Object(schema);
    if (type == "object") return "object";
    if (type == "array") {
      std::string item = schema.contains("items") ? Visit(schema["items"]) : "value";
      int min = schema.value("minItems", 0);
      std::string name = NewRule();
      std::string body = "\"[\" ws ";
      if (min > 0) {
        body += item;
        for (int i = 1; i < min; ++i) body += " \",\" ws " + item;
        body += " (\",\" ws " + item + ")*";
      } else {
        body += "(" + item + " (\",\" ws " + item + ")*)?";
      }
      rules.push_back(name + " ::= " + body + " \"]\" ws");
      return name;
    }
    if (type == "string" || type == "number" || type == "integer" || type == "boolean" || type == "null")
      return type;
    return "value";
  }

 private:
  std::string NewRule() { return "r" + std::to_string(next_++); }
  std::string Object(const nlohmann::json& schema) {
    std::string body = "\"{\" ws";
    bool first = true;
    for (const auto& [key, sub] : schema["properties"].items()) {
      std::string v = Visit(sub);
      body += std::string(first ? " " : " \",\" ws ") + Literal("\"" + key + "\"") + " ws \":\" ws " + v;
      first = false;
    }
    std::string name = NewRule();
    rules.push_back(name + " ::= " + body + " \"}\" ws");
    return name;
  }
  int next_ = 0;
};

}  // namespace

std::string JsonObjectGrammar() { return std::string("root ::= object\n") + kCommon; }

Result<std::string> JsonSchemaGrammar(const nlohmann::json& schema) {
  if (!schema.is_object()) return MakeError(ErrorCode::kInvalidArgument, "the JSON schema must be an object");
  Builder b;
  std::string root = b.Visit(schema);
  std::string g = "root ::= " + root + "\n";
  for (const auto& r : b.rules) g += r + "\n";
  return g + kCommon;
}

}  // namespace hone::serve
