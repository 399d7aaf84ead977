#include "api/request_framing.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace hone::api {
namespace {

using Verdict = RequestFraming::Verdict;

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Digits only (no sign, no spaces inside), below 2^62.
bool ParseLength(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// A chunk-size line's hex number, before any ";extension".
bool ParseChunkSize(std::string_view line, uint64_t* out) {
  line = Trim(line.substr(0, line.find(';')));
  if (line.empty() || line.size() > 15) return false;
  uint64_t v = 0;
  for (char c : line) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                              : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

Verdict RequestFraming::Examine(std::string_view bytes, const Limits& limits) {
  if (header_end_ == 0) {
    const Verdict v = ReadHeaders(bytes, limits);
    if (v != Verdict::kComplete) return v;  // kComplete here: the header block is whole
    if (!chunked_ && static_cast<uint64_t>(content_length_) > limits.max_body)
      return Verdict::kHandOver;  // a 413
    chunk_at_ = header_end_;
  }
  if (chunked_) return ReadChunks(bytes, limits);
  const size_t end = header_end_ + static_cast<size_t>(content_length_);
  if (bytes.size() < end) return Verdict::kNeedMore;
  request_end_ = end;
  return Verdict::kComplete;
}

// Finds the blank line that ends the header block: CRLF CRLF only, as the
// parser reads lines (without CPPHTTPLIB_ALLOW_LF_AS_LINE_TERMINATOR): a
// request the gate took as whole on bare LFs would leave the parser reading
// from the socket on a worker. Then reads the framing headers.
Verdict RequestFraming::ReadHeaders(std::string_view bytes, const Limits& limits) {
  const size_t from = header_scan_ >= 3 ? header_scan_ - 3 : 0;
  const size_t found = bytes.find("\r\n\r\n", from);
  const size_t end = found == std::string_view::npos ? 0 : found + 4;
  header_scan_ = bytes.size();
  if (!end) return bytes.size() > limits.max_header ? Verdict::kHandOver : Verdict::kNeedMore;
  if (end > limits.max_header) return Verdict::kHandOver;
  header_end_ = end;
  bool has_length = false;
  size_t line_start = bytes.find('\n') + 1;  // past the request line
  // "Expect: 100-continue" is ignored in HTTP/1.0 (RFC 9110 10.1.1), as the parser does.
  const bool http10 = bytes.substr(0, line_start).find("HTTP/1.0") != std::string_view::npos;
  while (line_start < end) {
    size_t nl = bytes.find('\n', line_start);
    std::string_view line = bytes.substr(line_start, nl - line_start);
    line_start = nl + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the blank line, or one the parser will refuse
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (SameName(name, "Content-Length")) {
      int64_t n = 0;
      if (!ParseLength(value, &n) || (has_length && n != content_length_)) return Verdict::kHandOver;
      has_length = true;
      content_length_ = n;
    } else if (SameName(name, "Transfer-Encoding")) {
      const std::string v = Lower(value);
      if (v.size() < 7 || v.compare(v.size() - 7, 7, "chunked") != 0) return Verdict::kHandOver;
      chunked_ = true;
    } else if (SameName(name, "Expect")) {
      expects_continue_ =
          expects_continue_ || (!http10 && Lower(value).find("100-continue") != std::string::npos);
    }
  }
  if (chunked_ && has_length && content_length_ > 0) return Verdict::kHandOver;  // ambiguous: a 400
  return Verdict::kComplete;
}

// Walks the chunks from chunk_at_: size line, data, CRLF; a size of 0 ends
// the body, and the trailer section ends with a blank line. Lines end with
// CRLF only (as the parser's). The bytes on the wire are bounded as well as
// the data: chunk extensions and trailers may not grow without end.
Verdict RequestFraming::ReadChunks(std::string_view bytes, const Limits& limits) {
  constexpr size_t kMaxSizeLine = 1024;
  if (bytes.size() > header_end_ + limits.max_body + limits.max_header) return Verdict::kHandOver;
  while (trailer_at_ == 0) {
    const size_t nl = bytes.find('\n', chunk_at_);
    if (nl == std::string_view::npos)
      return bytes.size() - chunk_at_ > kMaxSizeLine ? Verdict::kHandOver : Verdict::kNeedMore;
    if (nl - chunk_at_ > kMaxSizeLine || nl == chunk_at_ || bytes[nl - 1] != '\r') return Verdict::kHandOver;
    uint64_t size = 0;
    if (!ParseChunkSize(bytes.substr(chunk_at_, nl - 1 - chunk_at_), &size)) return Verdict::kHandOver;
    if (size == 0) {
      trailer_at_ = nl + 1;
      break;
    }
    if (body_bytes_ + size > limits.max_body) return Verdict::kHandOver;  // a 413
    const size_t data_end = nl + 1 + static_cast<size_t>(size);
    if (bytes.size() < data_end + 2) return Verdict::kNeedMore;
    if (bytes[data_end] != '\r' || bytes[data_end + 1] != '\n') return Verdict::kHandOver;
    body_bytes_ += size;
    chunk_at_ = data_end + 2;
  }
  // Trailer lines, then a blank line; trailer_at_ is where the next line begins.
  while (true) {
    const size_t nl = bytes.find('\n', trailer_at_);
    if (nl == std::string_view::npos) return Verdict::kNeedMore;  // bounded by the check above
    if (nl == trailer_at_ || bytes[nl - 1] != '\r') return Verdict::kHandOver;
    if (nl == trailer_at_ + 1) {
      request_end_ = nl + 1;
      return Verdict::kComplete;
    }
    trailer_at_ = nl + 1;
  }
}

}  // namespace hone::api
