#include "util/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace hone {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative decimal number at the front of `s` ("12", "1.5", ".5");
// advances `s` past it. False when there is none.
bool TakeNumber(std::string_view* s, double* out) {
  size_t n = 0;
  while (n < s->size() && (std::isdigit(static_cast<unsigned char>((*s)[n])) || (*s)[n] == '.')) ++n;
  if (n == 0) return false;
  // strtod on a copy, not stod: "." or 400 digits are bad input, not an exception.
  const std::string number(s->substr(0, n));
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) return false;
  *out = v;
  s->remove_prefix(n);
  return true;
}

std::string_view TakeLetters(std::string_view* s) {
  size_t n = 0;
  while (n < s->size() && std::isalpha(static_cast<unsigned char>((*s)[n]))) ++n;
  std::string_view letters = s->substr(0, n);
  s->remove_prefix(n);
  return letters;
}

double SecondsPer(std::string_view unit) {
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1;
  if (unit == "m") return 60;
  if (unit == "h") return 3600;
  return -1;
}

}  // namespace

Result<double> ParseDuration(std::string_view text) {
  const std::string shown(text);
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "bad duration '" + shown + "'" + why + " (use e.g. 30s, 5m, 1h30m, 250ms, 90 or -1)");
  };
  std::string_view s = Trim(text);
  const bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty()) return bad("");
  double total = 0;
  bool first = true;
  while (!s.empty()) {
    double v = 0;
    if (!TakeNumber(&s, &v)) return bad("");
    const std::string_view after_number = s;
    s = Trim(s);  // "3 parsecs" names its unit rather than failing as a stray word
    const std::string_view unit = TakeLetters(&s);
    if (unit.empty()) s = after_number;
    if (unit.empty()) {
      if (!first || !s.empty()) return bad(": a number after a unit needs its own unit");
      total = v;
      break;
    }
    const double per = SecondsPer(unit);
    if (per < 0) return bad(": unknown unit '" + std::string(unit) + "' (ms, s, m or h)");
    total += v * per;
    first = false;
  }
  if (!std::isfinite(total)) return bad("");
  return negative ? -total : total;
}

Result<uint64_t> ParseSize(std::string_view text) {
  const std::string shown(text);
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "bad size '" + shown + "' (use e.g. 512M, 8G, 1.5GiB or bytes)");
  };
  std::string_view s = Trim(text);
  double v = 0;
  if (!TakeNumber(&s, &v)) return bad();
  std::string unit(TakeLetters(&s));
  if (!s.empty()) return bad();
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!unit.empty() && unit != "B") {
    const char prefix = unit[0];
    const std::string rest = unit.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "IB")) return bad();
    mult = prefix == 'K'   ? 1024.0
           : prefix == 'M' ? 1048576.0
           : prefix == 'G' ? 1073741824.0
           : prefix == 'T' ? 1099511627776.0
                           : -1;
    if (mult < 0) return bad();
  }
  const double bytes = std::floor(v * mult);
  if (bytes >= 18446744073709551616.0) return bad();
  return static_cast<uint64_t>(bytes);
}

}  // namespace hone
