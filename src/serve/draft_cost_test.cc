// The draft cost model: the fit of step time on step tokens, and the draft
// lengths it chooses where decode is memory-bound and where it is not.
#include "serve/draft_cost.h"

#include <gtest/gtest.h>

namespace hone::serve {
namespace {

// Steps of 1 to 4 tokens timed as fixed + per_token * n.
StepCost Fitted(double fixed, double per_token) {
  StepCost c;
  for (int i = 0; i < 200; ++i) {
    const int n = 1 + i % 4;
    c.Record(n, fixed + per_token * n);
  }
  return c;
}

TEST(StepCost, RecoversTheFixedAndPerTokenCost) {
  StepCost c = Fitted(0.020, 0.002);
  ASSERT_TRUE(c.known());
  EXPECT_NEAR(c.fixed(), 0.020, 1e-6);
  EXPECT_NEAR(c.per_token(), 0.002, 1e-6);
  EXPECT_NEAR(c.Seconds(9), 0.038, 1e-6);
}

TEST(StepCost, StepsOfOneSizeLeaveTheSlopeUnknownAndGuessed) {
  StepCost c;
  EXPECT_EQ(c.Seconds(3), 0);  // nothing measured
  for (int i = 0; i < 50; ++i) c.Record(2, 0.010);
  EXPECT_FALSE(c.known());
  EXPECT_NEAR(c.Seconds(2), 0.010, 1e-9);
  EXPECT_NEAR(c.Seconds(3), 0.011, 1e-9);  // a tenth of a step per extra token
}

TEST(DraftCost, ExpectedKeptIsTheGeometricSum) {
  EXPECT_DOUBLE_EQ(ExpectedKept(0, 0.5), 0);
  EXPECT_DOUBLE_EQ(ExpectedKept(3, 0.5), 0.875);
  EXPECT_DOUBLE_EQ(ExpectedKept(4, 1.0), 4);
}

TEST(DraftCost, MemoryBoundDraftsLongWhenDraftsAreKept) {
  StepCost c = Fitted(0.030, 0.0005);  // a token costs 1/60 of a step
  EXPECT_EQ(BestDraftLength(c, 1, 1, 0.9, 16, 1.02), 16);
  const int k = BestDraftLength(c, 1, 1, 0.5, 16, 1.02);
  EXPECT_GE(k, 2);
  EXPECT_LT(k, 16);  // a long draft at 0.5 adds time for nothing
}

TEST(DraftCost, ComputeBoundDoesNotDraftWhatIsRarelyKept) {
  StepCost c = Fitted(0.010, 0.008);  // a token costs nearly a step
  EXPECT_EQ(BestDraftLength(c, 1, 1, 0.2, 8, 1.02), 0);
  EXPECT_GE(BestDraftLength(c, 1, 1, 0.95, 8, 1.02), 1);  // near-certain drafts still pay
}

TEST(DraftCost, AFullBatchLeavesNoRoomForDraftsThatMightMiss) {
  StepCost c = Fitted(0.020, 0.004);
  const int alone = BestDraftLength(c, 1, 1, 0.6, 8, 1.02);
  EXPECT_GE(alone, 1);
  // Eight slots already in the step: their tokens come cheap, a draft does not.
  EXPECT_EQ(BestDraftLength(c, 8, 8, 0.6, 8, 1.02), 0);
}

TEST(DraftCost, AForwardPassOfItsOwnPaysOnlyForDraftsNearlySureToBeKept) {
  StepCost c = Fitted(0.020, 0.001);  // four slots' step: 24 ms; a pass of its own: 20 ms more
  EXPECT_GE(BestDraftLength(c, 4, 4, 0.7, 16, 1.02), 1);
  EXPECT_EQ(BestDraftLength(c, 4, 4, 0.7, 16, 1.02, &c), 0);
  EXPECT_EQ(BestDraftLength(c, 4, 4, 0.99, 64, 1.02, &c), 64);  // answers ngram-mod has seen
  // A compute-bound model whose one-sequence passes cost little fixed time:
  // eight slots' 2.4 ms step, a pass of k tokens 0.45 + 0.14 k ms (the d256
  // TinyStories model on 2 cores), 96% kept: drafting beside them pays.
  StepCost step = Fitted(0.00075, 0.00027), pass = Fitted(0.00045, 0.00014);
  EXPECT_GE(BestDraftLength(step, 8, 8, 0.96, 64, 1.02, &pass), 8);
  EXPECT_EQ(BestDraftLength(step, 8, 8, 0.5, 64, 1.02, &pass), 0);
}

TEST(DraftCost, AcceptanceCountsTokensSoOneEarlyMissBarelyMovesIt) {
  DraftAcceptance a(0.5);
  EXPECT_DOUBLE_EQ(a.value(), 0.5);  // the prior until drafts come
  for (int i = 0; i < 4; ++i) a.Record(64, 64);
  EXPECT_GT(a.value(), 0.98);
  a.Record(64, 0);  // one miss at the first token
  EXPECT_GT(a.value(), 0.97);
  DraftAcceptance b(0.5);
  for (int i = 0; i < 20; ++i) b.Record(4, i % 2);  // a draft of 4 keeps 0 or 1
  EXPECT_GT(b.value(), 0.25);  // one kept per one and a half trials: 1/3, the latest drafts weighing most
  EXPECT_LT(b.value(), 0.45);
}

TEST(DraftCost, NothingMeasuredYetDraftsToMeasure) {
  StepCost c;
  EXPECT_EQ(BestDraftLength(c, 1, 1, 0.5, 4, 1.02), 4);
  EXPECT_EQ(BestDraftLength(c, 1, 1, 0.5, 0, 1.02), 0);
}

}  // namespace
}  // namespace hone::serve
