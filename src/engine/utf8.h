// Streamed text must always be valid UTF-8, yet byte-level tokenizers emit
// pieces that split a character (or are not UTF-8 at all). Utf8Stream sits
// between detokenizer and client: it holds back an incomplete multi-byte
// sequence until it completes and replaces invalid bytes with U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace hone::engine {

class Utf8Stream {
 public:
  // Appends bytes; returns the longest valid UTF-8 text that is now complete.
  std::string Push(std::string_view bytes);
  // End of stream: whatever is still held back was never completed -> U+FFFD.
  std::string Flush();
  bool has_pending() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

// Whole-string repair (same rules): invalid or truncated sequences -> U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);
bool IsValidUtf8(std::string_view bytes);

}  // namespace hone::engine
