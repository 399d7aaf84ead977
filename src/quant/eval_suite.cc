#include "quant/eval_suite.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "quant/files.h"

namespace hone::quant {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Decodes UTF-8 into code points (invalid bytes become U+FFFD).
std::vector<char32_t> CodePoints(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

bool IsHan(char32_t c) { return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF); }

Result<EvalCheck> ParseCheck(const nlohmann::json& j) {
  if (!j.is_object()) return MakeError(ErrorCode::kInvalidArgument, "\"check\" must be an object");
  EvalCheck c;
  c.type = j.value("type", "");
  auto need_str = [&](const char* key) -> Status {
    if (!j.contains(key) || !j[key].is_string()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "check type '" + c.type + "' needs a string \"" + key + "\"");
    }
    return Status::Ok();
  };
  if (c.type == "contains") {
    if (j.contains("any") && j["any"].is_array()) {
      for (const auto& a : j["any"]) {
        if (!a.is_string()) return MakeError(ErrorCode::kInvalidArgument, "\"any\" must list strings");
        c.any.push_back(a.get<std::string>());
      }
    } else if (Status s = need_str("value"); !s.ok()) {
      return s.error();
    } else {
      c.any.push_back(j["value"].get<std::string>());
    }
  } else if (c.type == "exact" || c.type == "regex") {
    const char* key = c.type == "regex" ? "pattern" : "value";
    if (Status s = need_str(key); !s.ok()) return s.error();
    c.value = j[key].get<std::string>();
    if (c.type == "regex") {
      try {
        std::regex re(c.value);
      } catch (const std::regex_error& e) {
        return MakeError(ErrorCode::kInvalidArgument, "bad regex '" + c.value + "': " + e.what());
      }
    }
  } else if (c.type == "number") {
    if (!j.contains("value") || !j["value"].is_number()) {
      return MakeError(ErrorCode::kInvalidArgument, "check type 'number' needs a numeric \"value\"");
    }
    c.number = j["value"].get<double>();
    c.tolerance = j.value("tolerance", 0.0);
  } else if (c.type == "compiles") {
    c.lang = j.value("lang", "c");
    if (c.lang != "c" && c.lang != "cpp" && c.lang != "python") {
      return MakeError(ErrorCode::kInvalidArgument,
                       "check 'compiles' lang must be c, cpp or python, not '" + c.lang + "'");
    }
  } else if (c.type != "quatrain") {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "check.type '" + c.type + "' is unknown (contains, regex, exact, number, compiles, quatrain)");
  }
  return c;
}

Result<EvalItem> ParseItem(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return MakeError(ErrorCode::kInvalidArgument, "not a JSON object");
  EvalItem it;
  if (!j.contains("prompt") || !j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "missing or empty \"prompt\"");
  }
  if (!j.contains("check")) return MakeError(ErrorCode::kInvalidArgument, "missing \"check\"");
  it.prompt = j["prompt"].get<std::string>();
  it.id = j.value("id", "");
  it.lang = j.value("lang", "");
  it.kind = j.value("kind", "");
  if (j.contains("max_tokens") && (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int>() <= 0)) {
    return MakeError(ErrorCode::kInvalidArgument, "\"max_tokens\" must be a positive integer");
  }
  it.max_tokens = j.value("max_tokens", 96);
  auto c = ParseCheck(j["check"]);
  if (!c) return c.error();
  it.check = *c;
  return it;
}

// Compiles `code` in a scratch folder; true when the compiler accepts it.
CheckOutcome Compiles(const std::string& code, const std::string& lang) {
  if (Trim(code).empty()) return {false, "no code in the answer"};
  char dir_tmpl[] = "/tmp/hone-eval-XXXXXX";
  if (!mkdtemp(dir_tmpl)) return {false, "cannot create a scratch folder"};
  const std::string dir = dir_tmpl;
  const std::string file = dir + (lang == "python" ? "/a.py" : lang == "cpp" ? "/a.cc" : "/a.c");
  (void)WriteTextAtomic(file, code);
  std::string cmd = lang == "python" ? "python3 -m py_compile " + file
                    : lang == "cpp"  ? "c++ -std=c++17 -fsyntax-only " + file
                                     : "cc -std=c11 -fsyntax-only " + file;
  int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return {rc == 0, rc == 0 ? "compiles" : "does not compile as " + lang};
}

}  // namespace

bool ParseFirstNumber(const std::string& text, double* out) {
  static const std::regex kNum(R"([-+]?\d[\d,]*(\.\d+)?)");
  std::smatch m;
  if (!std::regex_search(text, m, kNum)) return false;
  std::string s = m.str();
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  *out = std::strtod(s.c_str(), nullptr);
  return true;
}

std::string ExtractCode(const std::string& answer) {
  size_t open = answer.find("```");
  if (open == std::string::npos) return answer;
  size_t body = answer.find('\n', open);
  if (body == std::string::npos) return "";
  size_t close = answer.find("```", body);
  return answer.substr(body + 1, close == std::string::npos ? std::string::npos : close - body - 1);
}

bool IsFiveCharQuatrain(const std::string& text, std::string* why) {
  // Split on line breaks and Chinese/ASCII sentence punctuation; keep lines with Han characters.
  std::vector<int> lines;
  int han = 0, other = 0;
  auto flush = [&] {
    if (han > 0) lines.push_back(other > 0 ? -han : han);  // negative: mixed with non-Han letters
    han = other = 0;
  };
  for (char32_t c : CodePoints(text)) {
    if (c == '\n' || c == 0xFF0C || c == 0x3002 || c == ',' || c == '.' || c == 0xFF1B || c == 0xFF01 ||
        c == 0xFF1F || c == 0x3001) {
      flush();
    } else if (IsHan(c)) {
      ++han;
    } else if (c > 0x7F || std::isalnum(static_cast<int>(c))) {
      ++other;
    }
  }
  flush();
  if (lines.size() < 4) {
    *why = "found " + std::to_string(lines.size()) + " lines of Chinese, need 4";
    return false;
  }
  for (int i = 0; i < 4; ++i) {
    if (lines[i] != 5) {
      *why = "line " + std::to_string(i + 1) + " has " + std::to_string(std::abs(lines[i])) +
             " Han characters" + (lines[i] < 0 ? " and other letters" : "") + ", need 5";
      return false;
    }
  }
  *why = "4 lines of 5 characters";
  return true;
}

CheckOutcome RunCheck(const EvalCheck& c, const std::string& answer) {
  if (c.type == "contains") {
    for (const auto& a : c.any) {
      if (answer.find(a) != std::string::npos) return {true, "contains '" + a + "'"};
    }
    return {false, "contains none of the expected strings"};
  }
  if (c.type == "exact") {
    bool ok = Trim(answer) == Trim(c.value);
    return {ok, ok ? "exact match" : "not exactly '" + c.value + "'"};
  }
  if (c.type == "regex") {
    bool ok = std::regex_search(answer, std::regex(c.value));
    return {ok, ok ? "matches" : "no match for /" + c.value + "/"};
  }
  if (c.type == "number") {
    double v;
    if (!ParseFirstNumber(answer, &v)) return {false, "no number in the answer"};
    bool ok = std::abs(v - c.number) <= c.tolerance;
    std::ostringstream d;
    d << "first number " << v << (ok ? " within " : " not within ") << c.tolerance << " of " << c.number;
    return {ok, d.str()};
  }
  if (c.type == "compiles") return Compiles(ExtractCode(answer), c.lang);
  if (c.type == "quatrain") {
    std::string why;
    bool ok = IsFiveCharQuatrain(answer, &why);
    return {ok, why};
  }
  return {false, "unknown check type"};
}

Result<std::vector<EvalItem>> ParseEvalSuite(const std::string& text, const std::string& name) {
  std::vector<EvalItem> items;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    auto it = ParseItem(t);
    if (!it)
      return MakeError(ErrorCode::kInvalidArgument,
                       name + ":" + std::to_string(n) + ": " + it.error().message);
    if (it->id.empty()) it->id = "line" + std::to_string(n);
    items.push_back(std::move(*it));
  }
  if (items.empty()) return MakeError(ErrorCode::kInvalidArgument, name + " holds no tasks");
  return items;
}

Result<std::vector<EvalItem>> LoadEvalSuite(const std::string& path) {
  if (!std::filesystem::is_regular_file(path))
    return MakeError(ErrorCode::kNotFound, "eval file not found: " + path);
  return ParseEvalSuite(ReadText(path), path);
}

}  // namespace hone::quant
