#include "engine/sampler.h"

#include <gtest/gtest.h>

namespace hone::engine {

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsPossiblePrefixThenReleases) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.Push("hello <"), "hello ");
  EXPECT_EQ(m.Push("b>"), "<b>");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopAcrossPieces) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("one ST"), "one ");
  EXPECT_EQ(m.Push("OP two"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, EarliestOfSeveral) {
  StopMatcher m({"bb", "a"});
  EXPECT_EQ(m.Push("xxbbya"), "xx");  // "bb" at 2 comes before "a" at 5
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "bb");  // which one: Anthropic's stop_sequence
}

TEST(StopMatcher, NothingMatchedWithoutAStop) {
  StopMatcher m({"zz"});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_EQ(m.matched(), "");
}

TEST(StopMatcher, FlushReleasesHeldTail) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("end\n"), "end");
  EXPECT_EQ(m.Flush(), "\n");
}

TEST(StopMatcher, ChineseStop) {
  StopMatcher m({"。"});
  EXPECT_EQ(m.Push("你好"), "你好");
  EXPECT_EQ(m.Push("世界。再见"), "世界");
  EXPECT_TRUE(m.stopped());
}

}  // namespace hone::engine
