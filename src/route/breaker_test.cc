// Circuit breaker, key rotation, retry policy and the SSE parser: pure logic
// on a simulated clock.
#include "route/breaker.h"

#include <gtest/gtest.h>

#include "route/keyring.h"
#include "route/retry.h"
#include "route/sse.h"

namespace hone::route {
namespace {

TEST(Breaker, OpensAfterConsecutiveFailuresAndRecoversThroughOneProbe) {
  double now = 0;
  Breaker b(BreakerOptions{.consecutive_failures = 3, .cooldown_s = 10}, [&] { return now; });
  EXPECT_TRUE(b.Allow());
  b.Failure();
  b.Failure();
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  b.Success();  // resets the run
  b.Failure();
  b.Failure();
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  b.Failure();
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_FALSE(b.Allow());
  EXPECT_NEAR(b.RetryAfter(), 10, 1e-9);
  now = 9.9;
  EXPECT_FALSE(b.Allow());
  now = 10;
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(b.Allow());   // the probe
  EXPECT_FALSE(b.Allow());  // only one
  b.Failure();              // the probe failed: open again
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  now = 20;
  EXPECT_TRUE(b.Allow());
  b.Success();
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_TRUE(b.Allow());
  EXPECT_EQ(b.opened_count(), 2);
}

TEST(Breaker, OpensOnAFailureRateOnlyAboveTheMinimumVolume) {
  double now = 0;
  Breaker b(
      BreakerOptions{.consecutive_failures = 100, .failure_rate = 0.5, .min_volume = 10, .window_s = 60},
      [&] { return now; });
  for (int i = 0; i < 4; ++i) {
    b.Failure();
    b.Success();
  }
  b.Failure();  // 5 of 9 failed, below the volume
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  b.Failure();  // 6 of 10
  EXPECT_EQ(b.state(), BreakerState::kOpen);
}

TEST(Breaker, OldOutcomesLeaveTheWindow) {
  double now = 0;
  Breaker b(BreakerOptions{.consecutive_failures = 100, .failure_rate = 0.5, .min_volume = 4, .window_s = 10},
            [&] { return now; });
  b.Failure();
  b.Failure();
  b.Failure();
  now = 11;  // those three are out of the window
  b.Success();
  b.Success();
  b.Success();
  b.Failure();
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST(Breaker, AProbeThatNeverReportsDoesNotHoldItHalfOpenForever) {
  double now = 0;
  Breaker b(BreakerOptions{.consecutive_failures = 1, .cooldown_s = 5}, [&] { return now; });
  b.Failure();
  now = 5;
  EXPECT_TRUE(b.Allow());  // probe goes, and its client vanishes
  EXPECT_FALSE(b.Allow());
  now = 10.5;
  EXPECT_TRUE(b.Allow());
}

TEST(KeyRing, RotatesCoolsDownOn429AndRevokesOn401) {
  double now = 0;
  KeyRing ring({"sk-a", "sk-b", "sk-c"}, [&] { return now; });
  auto a = ring.Next(), b = ring.Next(), c = ring.Next();
  EXPECT_EQ(a->key, "sk-a");
  EXPECT_EQ(b->key, "sk-b");
  EXPECT_EQ(c->key, "sk-c");
  EXPECT_EQ(ring.Next()->key, "sk-a");
  ring.RateLimited(*b, 5);  // sk-b cools for 5 s
  ring.Rejected(*c, 401);   // sk-c is out
  EXPECT_EQ(ring.Next()->key, "sk-a");
  EXPECT_EQ(ring.Next()->key, "sk-a");
  EXPECT_NEAR(ring.SoonestAvailable(), 0, 1e-9);
  auto v = ring.Snapshot();
  EXPECT_EQ(v[1].health, KeyHealth::kCooling);
  EXPECT_NEAR(v[1].available_in_s, 5, 1e-9);
  EXPECT_EQ(v[2].health, KeyHealth::kRevoked);
  EXPECT_EQ(v[2].why, "HTTP 401");
  now = 5;
  EXPECT_EQ(ring.Next()->key, "sk-b");
  ring.Rejected(*a, 403);
  ring.Rejected(*b, 401);
  EXPECT_FALSE(ring.Next().has_value());
  EXPECT_TRUE(ring.AllRevoked());
}

TEST(KeyRing, AReloadBringsKeysBackAndStalePicksChangeNothing) {
  KeyRing ring({"sk-a", "sk-b"});
  auto a = ring.Next(), b = ring.Next();
  ring.Rejected(*a, 401);
  ring.Rejected(*b, 401);
  ASSERT_TRUE(ring.AllRevoked());
  ring.Replace({"sk-a", "sk-b", "sk-c"});
  EXPECT_FALSE(ring.AllRevoked());
  ring.Rejected(*a, 401);  // a report on a pick from the old list
  for (const KeyView& k : ring.Snapshot()) EXPECT_EQ(k.health, KeyHealth::kOk) << k.fingerprint;
  EXPECT_EQ(ring.Next()->key, "sk-a");
  EXPECT_EQ(ring.Redact("bad key sk-c here"), "bad key " + KeyFingerprint("sk-c") + " here");
}

TEST(KeyRing, FingerprintsNeverContainTheKey) {
  const std::string key = "sk-live-0123456789abcdef";
  std::string fp = KeyFingerprint(key);
  EXPECT_EQ(fp.rfind("key-", 0), 0u);
  EXPECT_EQ(fp.size(), 12u);
  EXPECT_EQ(fp.find("0123"), std::string::npos);
  EXPECT_NE(fp, KeyFingerprint("sk-live-0123456789abcdeg"));
  EXPECT_EQ(fp, KeyFingerprint(key));
  // No keys: one pick with no key (an upstream without authentication).
  KeyRing none({});
  ASSERT_TRUE(none.Next().has_value());
  EXPECT_EQ(none.Next()->key, "");
}

TEST(Retry, ClassifiesStatusesAsTheIssueAsks) {
  for (int s : {429, 500, 502, 503, 504}) EXPECT_TRUE(Retryable(ClassifyStatus(s))) << s;
  for (int s : {400, 404, 413, 422}) EXPECT_FALSE(Retryable(ClassifyStatus(s))) << s;
  EXPECT_EQ(ClassifyStatus(401), Outcome::kAuth);
  EXPECT_EQ(ClassifyStatus(302), Outcome::kServer);  // a moved base_url is the upstream's fault: 502, not 4xx
  EXPECT_EQ(ClassifyStatus(403), Outcome::kAuth);
  EXPECT_TRUE(UpstreamFault(Outcome::kServer));
  EXPECT_FALSE(UpstreamFault(Outcome::kRateLimited));  // the key's fault, not the upstream's
  EXPECT_FALSE(UpstreamFault(Outcome::kClient));
}

TEST(Retry, BackoffGrowsWithJitterAndHonoursRetryAfter) {
  std::mt19937 rng(7);
  RetryPolicy p{.base_backoff_s = 0.1, .max_backoff_s = 1.0};
  for (int i = 0; i < 200; ++i) {
    EXPECT_LE(BackoffSeconds(p, 1, 0, rng), 0.1);
    EXPECT_LE(BackoffSeconds(p, 3, 0, rng), 0.4);
    EXPECT_LE(BackoffSeconds(p, 10, 0, rng), 1.0);
    EXPECT_GE(BackoffSeconds(p, 1, 2.5, rng), 2.5);
  }
  double sum = 0;
  for (int i = 0; i < 1000; ++i) sum += BackoffSeconds(p, 3, 0, rng);
  EXPECT_NEAR(sum / 1000, 0.2, 0.03);  // uniform over [0, 0.4]
}

TEST(Sse, ParsesEventsSplitAnywhereAndTheDoneMarker) {
  const std::string stream =
      ": keep-alive\n\ndata: {\"a\":1}\n\nevent: error\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata: [DONE]\n\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    auto e1 = p.Feed(stream.substr(0, cut));
    auto e2 = p.Feed(stream.substr(cut));
    e1.insert(e1.end(), e2.begin(), e2.end());
    ASSERT_EQ(e1.size(), 2u) << cut;
    EXPECT_EQ(e1[0].data, "{\"a\":1}");
    EXPECT_EQ(e1[1].event, "error");
    EXPECT_EQ(e1[1].data, "{\"b\":\n2}");
    EXPECT_TRUE(p.done());
  }
  SseParser cut_short;
  cut_short.Feed("data: {\"a\":1}\n\ndata: {\"partial");
  EXPECT_FALSE(cut_short.done());
  EXPECT_GT(cut_short.buffered(), 0u);
}

}  // namespace
}  // namespace hone::route
