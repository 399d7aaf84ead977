// Task checks: a JSONL suite of prompts, each with an automatic checker.
// One object a line:
//   {"id": "en-math-1", "lang": "en", "kind": "reasoning", "prompt": "...",
//    "max_tokens": 64, "check": {"type": "number", "value": 42, "tolerance": 0}}
// Checker types: contains (value: string, or any: [strings]), regex (pattern),
// exact (value, compared trimmed), number (value, tolerance: the first number
// in the answer), compiles (lang: c | cpp | python: the first code block, or the
// whole answer, must compile), quatrain (a five-character jueju: 4 lines of 5
// Han characters). Blank lines and lines starting with '#' are skipped.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace hone::quant {

struct EvalCheck {
  std::string type;
  std::string value;                 // contains/exact/regex pattern
  std::vector<std::string> any;      // contains: any of these
  double number = 0, tolerance = 0;  // number
  std::string lang;                  // compiles
};

struct EvalItem {
  std::string id, lang, kind, prompt;
  int max_tokens = 96;
  EvalCheck check;
};

// Errors name the file and line: "evals/x.jsonl:7: check.type 'foo' is unknown".
Result<std::vector<EvalItem>> LoadEvalSuite(const std::string& path);
Result<std::vector<EvalItem>> ParseEvalSuite(const std::string& text, const std::string& name);

struct CheckOutcome {
  bool pass = false;
  std::string detail;  // why it failed (or what matched)
};

CheckOutcome RunCheck(const EvalCheck& check, const std::string& answer);

// Helpers exposed for tests.
bool ParseFirstNumber(const std::string& text, double* out);
std::string ExtractCode(const std::string& answer);
bool IsFiveCharQuatrain(const std::string& text, std::string* why);

}  // namespace hone::quant
