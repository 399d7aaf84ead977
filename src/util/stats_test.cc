#include "util/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hone {

TEST(Stats, MeanStddevAndCi) {
  Summary s = Summarize({10, 12, 14});
  EXPECT_DOUBLE_EQ(s.mean, 12);
  EXPECT_DOUBLE_EQ(s.stddev, 2);
  EXPECT_NEAR(s.ci95, 4.303 * 2 / std::sqrt(3.0), 1e-9);
  EXPECT_DOUBLE_EQ(s.median, 12);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 14);
}

TEST(Stats, SingleSampleHasNoSpread) {
  Summary s = Summarize({5});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.ci95, 0);
  EXPECT_DOUBLE_EQ(s.cv(), 0);
}

TEST(Stats, EmptyIsZero) { EXPECT_EQ(Summarize({}).n, 0); }

TEST(Stats, EvenMedian) { EXPECT_DOUBLE_EQ(Summarize({4, 1, 3, 2}).median, 2.5); }

}  // namespace hone
