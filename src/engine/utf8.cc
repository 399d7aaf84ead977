#include "engine/utf8.h"

namespace hone::engine {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length a sequence starting with lead byte b must have; 0 = invalid lead.
int SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;  // continuation byte, overlong C0/C1, or F5..FF
}

// Valid range of the second byte, which rules out overlongs, surrogates and
// code points past U+10FFFF (RFC 3629 table).
bool SecondByteOk(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

bool IsCont(unsigned char b) { return b >= 0x80 && b <= 0xBF; }

// Decodes as much of `in` as possible into `out`. When `final` is false a
// valid-so-far sequence cut off by the end of input is left unconsumed;
// returns the number of bytes consumed.
size_t Decode(std::string_view in, std::string& out, bool final) {
  size_t i = 0;
  while (i < in.size()) {
    unsigned char lead = in[i];
    int len = SequenceLength(lead);
    if (len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (len == 1) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // Check the bytes that are present; a bad one ends the sequence early.
    int good = 1;
    bool broken = false;
    for (int k = 1; k < len; ++k) {
      if (i + k >= in.size()) break;
      unsigned char b = in[i + k];
      bool ok = k == 1 ? SecondByteOk(lead, b) : IsCont(b);
      if (!ok) {
        broken = true;
        break;
      }
      ++good;
    }
    if (good == len) {
      out.append(in.substr(i, len));
      i += len;
    } else if (broken || final) {
      // One U+FFFD for the maximal invalid prefix, as the Unicode standard advises.
      out += kReplacement;
      i += good;
    } else {
      return i;  // incomplete but so far valid: wait for more bytes
    }
  }
  return i;
}

}  // namespace

std::string Utf8Stream::Push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t used = Decode(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string Utf8Stream::Flush() {
  std::string out;
  Decode(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  Decode(bytes, out, /*final=*/true);
  return out;
}

bool IsValidUtf8(std::string_view bytes) { return SanitizeUtf8(bytes) == bytes; }

}  // namespace hone::engine
