#include "serve/json_grammar.h"

#include <map>
#include <utility>
#include <vector>

namespace hone::serve {
namespace {

// Shared rules, after llama.cpp's grammars/json.gbnf. Whitespace is bounded so
// a model cannot stall in an endless run of spaces.
const char* kCommon = R"(value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" char* "\"" ws
char   ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4})
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

// Bounds that hold whatever the schema: recursion depth (the stack), schemas
// visited (type lists and alternatives revisit their subschema, so nesting
// multiplies), and the grammar's size (llama.cpp parses it on every request).
constexpr int kMaxDepth = 64;
constexpr int kMaxVisits = 20000;
constexpr size_t kMaxGrammarBytes = 256 << 10;
constexpr int kMaxCount = 4096;  // minLength, maxLength, minItems, maxItems

class Builder {
 public:
  explicit Builder(const nlohmann::json& root) : root_(root) {}
  std::vector<std::string> rules;

  // Returns the name of a rule (or an inline expression) matching `schema`.
  Result<std::string> Visit(const nlohmann::json& schema) {
    struct Deeper {
      int& d;
      ~Deeper() { --d; }
    } deeper{++depth_};
    if (depth_ > kMaxDepth)
      return MakeError(ErrorCode::kInvalidArgument,
                       "JSON schema: nested more than " + std::to_string(kMaxDepth) + " levels deep");
    if (++visits_ > kMaxVisits)
      return MakeError(ErrorCode::kInvalidArgument,
                       "JSON schema: more than " + std::to_string(kMaxVisits) +
                           " subschemas to expand (nested type lists or alternatives multiply)");
    auto out = VisitOne(schema);
    if (out && out->size() + rule_bytes_ > kMaxGrammarBytes)
      return MakeError(ErrorCode::kInvalidArgument, "JSON schema: its grammar would be larger than " +
                                                        std::to_string(kMaxGrammarBytes >> 10) + " KiB");
    return out;
  }

 private:
  Result<std::string> VisitOne(const nlohmann::json& schema) {
    if (schema.is_boolean() && !schema.get<bool>())
      return MakeError(ErrorCode::kInvalidArgument, "JSON schema: `false` can never be satisfied");
    if (!schema.is_object()) return std::string("value");
    if (schema.contains("$ref")) return Ref(schema["$ref"]);
    if (schema.contains("const")) return "(" + Literal(schema["const"].dump()) + " ws)";
    if (schema.contains("enum") && schema["enum"].is_array()) {
      std::string alt;
      for (const auto& v : schema["enum"]) alt += (alt.empty() ? "" : " | ") + Literal(v.dump());
      return alt.empty() ? std::string("value") : "((" + alt + ") ws)";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (schema.contains(key) && schema[key].is_array()) return Alternatives(schema[key]);
    }
    // allOf of one schema (what generators emit around a $ref) is that schema.
    if (schema.contains("allOf") && schema["allOf"].is_array() && schema["allOf"].size() == 1)
      return Visit(schema["allOf"][0]);
    if (schema.contains("type") && schema["type"].is_array()) {
      nlohmann::json alts = nlohmann::json::array();
      for (const auto& t : schema["type"]) {
        nlohmann::json one = schema;
        one["type"] = t;
        alts.push_back(one);
      }
      return Alternatives(alts);
    }
    std::string type = schema.value("type", std::string());
    if (type.empty() && schema.contains("properties")) type = "object";
    if (type == "object" && schema.contains("properties") && schema["properties"].is_object())
      return Object(schema);
    if (type == "object") return std::string("object");
    if (type == "array") return Array(schema);
    if (type == "string" && (schema.contains("minLength") || schema.contains("maxLength"))) {
      auto r = Range(schema, "minLength", "maxLength");
      if (!r) return r.error();
      const auto [min, max] = *r;
      std::string rep = "{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
      return "(\"\\\"\" char" + rep + " \"\\\"\" ws)";
    }
    if (type == "string" || type == "number" || type == "integer" || type == "boolean" || type == "null")
      return type;
    return std::string("value");
  }

  // A length or item count: an integer from 0 to kMaxCount (llama.cpp's
  // grammar parser expands x{m,n} into n rules), or `absent` when not given.
  static Result<int> Count(const nlohmann::json& schema, const char* key, int absent) {
    if (!schema.contains(key)) return absent;
    const nlohmann::json& v = schema[key];
    const double d = v.is_number() ? v.get<double>() : -1;
    if (d < 0 || d > kMaxCount || d != static_cast<double>(static_cast<int>(d)))
      return MakeError(ErrorCode::kInvalidArgument, std::string("JSON schema: '") + key +
                                                        "' must be an integer from 0 to " + std::to_string(kMaxCount) +
                                                        ", not " + v.dump().substr(0, 40));
    return static_cast<int>(d);
  }
  static Result<std::pair<int, int>> Range(const nlohmann::json& schema, const char* min_key, const char* max_key) {
    auto min = Count(schema, min_key, 0), max = Count(schema, max_key, -1);
    if (!min) return min.error();
    if (!max) return max.error();
    if (*max >= 0 && *min > *max)
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("JSON schema: '") + min_key + "' is larger than '" + max_key + "'");
    return std::make_pair(*min, *max);
  }

  std::string NewRule() { return "r" + std::to_string(next_++); }
  void AddRule(const std::string& name, const std::string& body) {
    rules.push_back(name + " ::= " + body);
    rule_bytes_ += rules.back().size() + 1;
  }

  // Local references only ("#/$defs/X", "#/definitions/X", "#"): a request
  // must not make the server fetch anything. Each target becomes one named
  // rule, so recursive schemas (trees, linked lists) work.
  Result<std::string> Ref(const nlohmann::json& ref) {
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "JSON schema: only local $ref (\"#/...\") is supported, got " + ref.dump());
    }
    const std::string path = ref.get<std::string>().substr(1);
    if (auto it = refs_.find(path); it != refs_.end()) return it->second;
    nlohmann::json::json_pointer ptr;
    try {
      ptr = nlohmann::json::json_pointer(path);
    } catch (const std::exception&) {
      return MakeError(ErrorCode::kInvalidArgument, "JSON schema: bad $ref " + ref.dump());
    }
    if (!root_.contains(ptr)) {
      return MakeError(ErrorCode::kInvalidArgument, "JSON schema: $ref " + ref.dump() + " points nowhere");
    }
    const std::string name = NewRule();
    refs_[path] = name;  // before visiting: a recursive reference finds it
    auto body = Visit(root_[ptr]);
    if (!body) return body.error();
    AddRule(name, *body);
    return name;
  }

  Result<std::string> Alternatives(const nlohmann::json& list) {
    std::string alt;
    for (const auto& sub : list) {
      auto v = Visit(sub);
      if (!v) return v.error();
      alt += (alt.empty() ? "" : " | ") + *v;
    }
    return alt.empty() ? std::string("value") : "(" + alt + ")";
  }

  Result<std::string> Array(const nlohmann::json& schema) {
    std::string item = "value";
    if (schema.contains("items")) {
      auto v = Visit(schema["items"]);
      if (!v) return v.error();
      item = *v;
    }
    auto r = Range(schema, "minItems", "maxItems");
    if (!r) return r.error();
    const auto [min, max] = *r;
    std::string body = "\"[\" ws ";
    if (min > 0) {
      body += item;
      const std::string more = max < 0 ? "*" : "{0," + std::to_string(std::max(0, max - min)) + "}";
      body += " (\",\" ws " + item + "){" + std::to_string(min - 1) + "}";
      body += " (\",\" ws " + item + ")" + more;
    } else if (max != 0) {
      const std::string more = max < 0 ? "*" : "{0," + std::to_string(max - 1) + "}";
      body += "(" + item + " (\",\" ws " + item + ")" + more + ")?";
    }
    std::string name = NewRule();
    AddRule(name, body + " \"]\" ws");
    return name;
  }

  // Properties in the schema's order. Without "required", every property is
  // emitted (OpenAI's strict mode requires all of them anyway); with it, the
  // others may be left out, keeping the order.
  Result<std::string> Object(const nlohmann::json& schema) {
    std::vector<std::pair<std::string, bool>> props;  // rule for `"key": value`, required
    const bool has_required = schema.contains("required") && schema["required"].is_array();
    for (const auto& [key, sub] : schema["properties"].items()) {
      auto v = Visit(sub);
      if (!v) return v.error();
      bool required = !has_required;
      if (has_required) {
        for (const auto& r : schema["required"]) required |= r == key;
      }
      props.push_back({Literal("\"" + key + "\"") + " ws \":\" ws " + *v, required});
    }
    // tail[i]: the properties from i on, each preceded by a comma. A long
    // tail becomes a named rule, so the grammar grows linearly with the
    // properties (inlined, each tail would repeat all the ones after it).
    std::vector<std::string> tail(props.size() + 1);
    for (size_t i = props.size(); i-- > 0;) {
      const std::string item = "\",\" ws " + props[i].first;
      std::string t = (props[i].second ? item : "(" + item + ")?") + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      if (t.size() > 512) {
        const std::string name = NewRule();
        AddRule(name, t);
        t = name;
      }
      tail[i] = std::move(t);
      if (rule_bytes_ > kMaxGrammarBytes)
        return MakeError(ErrorCode::kInvalidArgument, "JSON schema: its grammar would be larger than " +
                                                          std::to_string(kMaxGrammarBytes >> 10) + " KiB");
    }
    // The first property present starts without a comma: every optional one
    // before the first required one may be that first property.
    std::string alts;
    size_t i = 0;
    for (; i < props.size(); ++i) {
      alts += (alts.empty() ? "" : " | ") + props[i].first + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      if (props[i].second) break;
    }
    std::string body = "\"{\" ws ";
    if (!alts.empty()) body += (i == props.size() ? "(" + alts + ")?" : "(" + alts + ")");
    std::string name = NewRule();
    AddRule(name, body + " \"}\" ws");
    return name;
  }

  const nlohmann::json& root_;
  std::map<std::string, std::string> refs_;
  int next_ = 0;
  int depth_ = 0;           // Visit calls now on the stack
  int visits_ = 0;          // Visit calls so far
  size_t rule_bytes_ = 0;   // the named rules' text so far
};

}  // namespace

std::string JsonObjectGrammar() { return std::string("root ::= object\n") + kCommon; }

Result<std::string> JsonSchemaGrammar(const nlohmann::json& schema) {
  if (!schema.is_object()) return MakeError(ErrorCode::kInvalidArgument, "the JSON schema must be an object");
  Builder b(schema);
  Result<std::string> root = std::string();
  try {
    root = b.Visit(schema);
  } catch (const nlohmann::json::exception& e) {  // e.g. "maxLength": "long"
    return MakeError(ErrorCode::kInvalidArgument, std::string("JSON schema: ") + e.what());
  }
  if (!root) return root.error();
  std::string g = "root ::= " + *root + "\n";
  for (const auto& r : b.rules) g += r + "\n";
  return g + kCommon;
}

}  // namespace hone::serve
