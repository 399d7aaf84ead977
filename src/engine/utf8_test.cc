#include "engine/utf8.h"

#include <gtest/gtest.h>

namespace hone::engine {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Stream, PassesAscii) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("hello"), "hello");
  EXPECT_EQ(s.Flush(), "");
}

TEST(Utf8Stream, HoldsBackSplitCharacterUntilComplete) {
  // 中 = E4 B8 AD, split across three pieces as a byte-level tokenizer may do.
  Utf8Stream s;
  EXPECT_EQ(s.Push("a\xE4"), "a");
  EXPECT_TRUE(s.has_pending());
  EXPECT_EQ(s.Push("\xB8"), "");
  EXPECT_EQ(s.Push("\xAD"
                   "b"),
            "\xE4\xB8\xAD"
            "b");
  EXPECT_FALSE(s.has_pending());
}

TEST(Utf8Stream, FourByteEmojiSplit) {
  Utf8Stream s;  // 😀 = F0 9F 98 80
  EXPECT_EQ(s.Push("\xF0\x9F"), "");
  EXPECT_EQ(s.Push("\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(Utf8Stream, InvalidBytesBecomeReplacement) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("x\xFFy"), "x" + kFffd + "y");
  EXPECT_EQ(s.Push("\x80"), kFffd);              // stray continuation byte
  EXPECT_EQ(s.Push("\xC0\xAF"), kFffd + kFffd);  // overlong lead C0 is never valid
}

TEST(Utf8Stream, BrokenSequenceIsReplacedAndNextCharKept) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("\xE4\xB8"), "");
  EXPECT_EQ(s.Push("A"), kFffd + "A");  // sequence cut by an ASCII byte
}

TEST(Utf8Stream, SurrogatesAndTooLargeRejected) {
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // U+D800
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
}

TEST(Utf8Stream, FlushReplacesIncompleteTail) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("ok\xE4\xB8"), "ok");
  EXPECT_EQ(s.Flush(), kFffd);
  EXPECT_EQ(s.Flush(), "");
}

TEST(Utf8Stream, EveryOutputIsValidForRandomBytes) {
  uint32_t x = 12345;
  Utf8Stream s;
  std::string all;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1664525u + 1013904223u;
    std::string piece(1 + (x >> 30), '\0');
    for (auto& c : piece) {
      x = x * 1664525u + 1013904223u;
      c = static_cast<char>(x >> 24);
    }
    std::string out = s.Push(piece);
    EXPECT_TRUE(IsValidUtf8(out));
    all += out;
  }
  all += s.Flush();
  EXPECT_TRUE(IsValidUtf8(all));
}

TEST(Utf8, ChineseTextIsValid) {
  EXPECT_TRUE(IsValidUtf8("满纸荒唐言，一把辛酸泪。"));
  EXPECT_FALSE(IsValidUtf8("\xE6\xBB"));
}

}  // namespace hone::engine
