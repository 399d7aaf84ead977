// The key queue (key_queue.h): order, one release at a time after a
// cooldown, jitter bounds, slow start, and leaving at the deadline with a
// Retry-After from the queue. The policy runs on a simulated clock through
// TryTake; Acquire's blocking runs on the real clock, synchronised on
// events (a grant, a report), never on sleeps.
#include "route/key_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <thread>

namespace hone::route {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A ring of `keys` on a clock the test moves, and a queue over it.
struct Fixture {
  double now = 100;
  KeyRing ring;
  KeyQueue queue;
  Fixture(std::vector<std::string> keys, KeyQueueOptions o, uint32_t seed = 7)
      : ring(std::move(keys), [this] { return now; }), queue(ring, o, seed) {}

  std::optional<KeyRing::Pick> Take(KeyQueue::Ticket* t, double* wake = nullptr) {
    double w;
    auto p = queue.TryTake(t, now, &w);
    if (wake) *wake = w;
    return p;
  }
  // A 429 on `p` as RemoteBackend reports it: the ring first, then the queue.
  void Limited(const KeyRing::Pick& p, double retry_after_s) {
    ring.RateLimited(p, retry_after_s);
    queue.Report(p, KeyQueue::Verdict::kRateLimited);
  }
  // Takes a key with a fresh ticket and has it rate limited: the key cools.
  void Cool(double retry_after_s) {
    KeyQueue::Ticket t;
    auto p = Take(&t);
    ASSERT_TRUE(p);
    Limited(*p, retry_after_s);
  }
};

TEST(KeyQueue, UnpacedKeysServeEveryRequestAtOnce) {
  Fixture f({"a", "b"}, {});
  std::vector<KeyRing::Pick> picks;
  for (int i = 0; i < 6; ++i) {
    KeyQueue::Ticket t;
    auto p = f.Take(&t);
    ASSERT_TRUE(p) << i;
    picks.push_back(*p);
  }
  EXPECT_EQ(picks[0].index, 0u);  // in rotation
  EXPECT_EQ(picks[1].index, 1u);
  EXPECT_EQ(picks[2].index, 0u);
  EXPECT_EQ(f.queue.waiting(), 0u);
}

TEST(KeyQueue, WaitersAreReleasedInTheirOrderOneAtATimePerKey) {
  Fixture f({"a", "b"}, {.gap_s = 0.02});
  f.Cool(1);
  f.Cool(1);  // both keys cool until 101
  KeyQueue::Ticket t[4];
  double wake = 0;
  for (auto& ti : t) EXPECT_FALSE(f.Take(&ti));
  EXPECT_EQ(f.queue.waiting(), 4u);
  // Only the head waits for a time; the others wait for it to leave.
  EXPECT_FALSE(f.Take(&t[0], &wake));
  EXPECT_GE(wake, 101.0);
  EXPECT_LE(wake, 101.02);
  EXPECT_FALSE(f.Take(&t[1], &wake));
  EXPECT_EQ(wake, kInf);

  f.now = 101.5;  // both cooldowns over
  EXPECT_FALSE(f.Take(&t[3]));  // not the head: later arrivals never jump ahead
  EXPECT_FALSE(f.Take(&t[2]));
  auto p0 = f.Take(&t[0]);
  auto p1 = f.Take(&t[1]);
  ASSERT_TRUE(p0 && p1);
  EXPECT_NE(p0->index, p1->index);
  // Each key just off its cooldown has its one release out: nobody else goes
  // until the upstream answered it, however much time passes.
  EXPECT_FALSE(f.Take(&t[2], &wake));
  EXPECT_EQ(wake, kInf);
  f.now = 130;
  EXPECT_FALSE(f.Take(&t[2]));

  f.queue.Report(*p0, KeyQueue::Verdict::kAccepted);
  auto p2 = f.Take(&t[2]);
  ASSERT_TRUE(p2);
  EXPECT_EQ(p2->index, p0->index);
  EXPECT_EQ(f.queue.waiting(), 1u);
}

TEST(KeyQueue, ARateLimitedRequestGoesBackToItsPlace) {
  Fixture f({"a"}, {.gap_s = 0});
  f.Cool(1);
  KeyQueue::Ticket first, second;
  EXPECT_FALSE(f.Take(&first));
  EXPECT_FALSE(f.Take(&second));
  f.now = 101;
  auto p = f.Take(&first);
  ASSERT_TRUE(p);
  f.Limited(*p, 1);  // the first request is refused again
  EXPECT_FALSE(f.Take(&first));  // back in the queue, ahead of `second`
  f.now = 102;
  EXPECT_FALSE(f.Take(&second));
  EXPECT_TRUE(f.Take(&first));
}

TEST(KeyQueue, ManyWaitersAtACooldownsEndGetOneReleasePerKey) {
  Fixture f({"a", "b"}, {.gap_s = 0.02});
  f.Cool(1);
  f.Cool(1);
  std::vector<KeyQueue::Ticket> t(20);
  for (auto& ti : t) EXPECT_FALSE(f.Take(&ti));
  f.now = 102;  // long past both cooldowns: everyone asks at the same instant
  int released = 0;
  std::vector<bool> granted(t.size());
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < t.size(); ++i)
      if (!granted[i] && f.Take(&t[i])) {
        granted[i] = true;
        ++released;
      }
  EXPECT_EQ(released, 2);
  EXPECT_EQ(f.queue.waiting(), 18u);
}

TEST(KeyQueue, JitterStaysInItsBounds) {
  const double gap = 0.02;
  Fixture f({"a"}, {.gap_s = gap, .open_window = 1000});
  double lo = kInf, hi = 0, spacing_lo = kInf, spacing_hi = 0;
  for (int i = 0; i < 200; ++i) {
    KeyQueue::Ticket t;
    auto p = f.Take(&t);  // unpaced at first, then the release after the last cooldown
    ASSERT_TRUE(p) << i;
    f.Limited(*p, 1);
    const double cool_end = f.now + 1;
    double wake = 0;
    KeyQueue::Ticket w;
    EXPECT_FALSE(f.Take(&w, &wake));
    EXPECT_GE(wake, cool_end);
    EXPECT_LE(wake, cool_end + gap);
    lo = std::min(lo, wake - cool_end);
    hi = std::max(hi, wake - cool_end);
    f.now = wake;
    auto probe = f.Take(&w);
    ASSERT_TRUE(probe);
    f.queue.Report(*probe, KeyQueue::Verdict::kAccepted);
    // The next paced release waits [gap, 2 gap] after the probe went.
    KeyQueue::Ticket next;
    EXPECT_FALSE(f.Take(&next, &wake));
    EXPECT_GE(wake - f.now, gap - 1e-9);
    EXPECT_LE(wake - f.now, 2 * gap + 1e-9);
    spacing_lo = std::min(spacing_lo, wake - f.now);
    spacing_hi = std::max(spacing_hi, wake - f.now);
    f.now = wake;
    auto q = f.Take(&next);
    ASSERT_TRUE(q);
    f.queue.Report(*q, KeyQueue::Verdict::kAccepted);
    f.now += 1;
  }
  // Jitter, not a constant: the draws cover most of their range.
  EXPECT_LT(lo, 0.2 * gap);
  EXPECT_GT(hi, 0.8 * gap);
  EXPECT_LT(spacing_lo, 1.2 * gap);
  EXPECT_GT(spacing_hi, 1.8 * gap);
}

TEST(KeyQueue, AcceptedReleasesOpenTheKeyAgain) {
  Fixture f({"a"}, {.gap_s = 0, .open_window = 3});
  f.Cool(1);
  f.now = 102;
  // Slow start: window 1, then 2, then unpaced.
  KeyQueue::Ticket t1, t2, t3, t4, t5;
  auto p1 = f.Take(&t1);
  ASSERT_TRUE(p1);
  EXPECT_FALSE(f.Take(&t2));
  f.queue.Report(*p1, KeyQueue::Verdict::kAccepted);  // window 2
  auto p2 = f.Take(&t2);
  auto p3 = f.Take(&t3);
  ASSERT_TRUE(p2 && p3);
  EXPECT_FALSE(f.Take(&t4));
  f.queue.Report(*p2, KeyQueue::Verdict::kAccepted);  // window 3: open
  auto p4 = f.Take(&t4);
  auto p5 = f.Take(&t5);  // p3 and p4 still out: unpaced takes no notice
  ASSERT_TRUE(p4 && p5);
  // A 429 paces it from one release again, once every earlier one is answered.
  f.Limited(*p3, 1);
  f.now = 104;
  KeyQueue::Ticket t6, t7;
  EXPECT_FALSE(f.Take(&t6));
  // Their answers (sent before the 429) free the window but do not grow it.
  f.queue.Report(*p4, KeyQueue::Verdict::kAccepted);
  f.queue.Report(*p5, KeyQueue::Verdict::kAccepted);
  auto p6 = f.Take(&t6);
  ASSERT_TRUE(p6);
  EXPECT_FALSE(f.Take(&t7));
  f.queue.Report(*p6, KeyQueue::Verdict::kAccepted);  // window 2
  KeyQueue::Ticket t8;
  EXPECT_TRUE(f.Take(&t7));
  EXPECT_TRUE(f.Take(&t8));
}

TEST(KeyQueue, RetryAfterCountsTheRequestsAheadAtTheMeasuredPace) {
  // No history: each key serves one request per cooldown (2 s over 2 keys: 1 s each).
  Fixture f({"a", "b"}, {.gap_s = 0});
  f.Cool(2);
  f.Cool(2);  // both free at 102
  KeyQueue::Ticket t[3];
  for (auto& ti : t) EXPECT_FALSE(f.Take(&ti));
  EXPECT_EQ(f.queue.Leave(t[2], f.now), 4);  // 2 s to the cooldown's end + 2 ahead x 1 s
  EXPECT_EQ(f.queue.Leave(t[0], f.now), 2);  // the head: the cooldown only
  EXPECT_EQ(f.queue.waiting(), 1u);

  // Measured: accepted releases 0.25 s apart.
  Fixture g({"a"}, {.gap_s = 0, .open_window = 1000});
  for (int i = 0; i < 5; ++i) {
    KeyQueue::Ticket ti;
    auto p = g.Take(&ti);
    ASSERT_TRUE(p);
    g.queue.Report(*p, KeyQueue::Verdict::kAccepted);
    g.now += 0.25;
  }
  g.Cool(3);  // free 3 s from now
  std::vector<KeyQueue::Ticket> w(9);
  for (auto& wi : w) EXPECT_FALSE(g.Take(&wi));
  EXPECT_EQ(g.queue.Leave(w[8], g.now), 5);  // 3 s + 8 ahead x 0.25 s
  EXPECT_EQ(g.queue.Snapshot().waiting, 8u);
  EXPECT_EQ(g.queue.Snapshot().retry_after_s, 5);  // one joining now: 8 ahead
}

TEST(KeyQueue, AnUpstreamWithoutKeysDoesNotQueue) {
  Fixture f({}, {});
  KeyQueue::Ticket t;
  auto p = f.queue.Acquire(&t, std::chrono::steady_clock::now());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->key, "");
}

TEST(KeyQueue, EveryKeyRevokedIsUnavailableAtOnce) {
  KeyRing ring({"a"});
  KeyQueue q(ring);
  KeyQueue::Ticket t;
  auto p = q.Acquire(&t, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(p);
  ring.Rejected(*p, 401);
  q.Report(*p, KeyQueue::Verdict::kOther);
  KeyQueue::Ticket t2;
  auto r = q.Acquire(&t2, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(KeyQueue, NoCooldownEndsBeforeTheDeadlineLeavesAtOnceWithRetryAfter) {
  KeyRing ring({"a"});
  KeyQueue q(ring, {.gap_s = 0});
  KeyQueue::Ticket t;
  auto p = q.Acquire(&t, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(p);
  ring.RateLimited(*p, 5);
  q.Report(*p, KeyQueue::Verdict::kRateLimited);
  KeyQueue::Ticket t2;
  const auto start = std::chrono::steady_clock::now();
  auto r = q.Acquire(&t2, start + std::chrono::seconds(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kRateLimited);
  EXPECT_EQ(r.error().retry_after_s, 5);
  // It did not sit out the 2 s: 5 s of cooldown cannot end within them.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(KeyQueue, AWaiterKeepsItsPlaceUntilTheDeadlineThenLeavesWithRetryAfter) {
  KeyRing ring({"a"});
  KeyQueue q(ring, {.gap_s = 0});
  KeyQueue::Ticket t;
  auto p = q.Acquire(&t, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(p);
  ring.RateLimited(*p, 0.001);  // 1 ms (a 429 of less than 1 s is rounded to 1 s by the backend)
  q.Report(*p, KeyQueue::Verdict::kRateLimited);
  // The probe after the cooldown is out and never answered: the key is usable
  // (so waiting can help) but its window is full until the deadline.
  KeyQueue::Ticket probe_t;
  auto probe = q.Acquire(&probe_t, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(probe);
  KeyQueue::Ticket t2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  auto r = q.Acquire(&t2, deadline);
  ASSERT_FALSE(r);
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
  EXPECT_EQ(r.error().code, ErrorCode::kRateLimited);
  EXPECT_GE(r.error().retry_after_s, 1);
  EXPECT_EQ(q.waiting(), 0u);
  q.Report(*probe, KeyQueue::Verdict::kAccepted);
}

TEST(KeyQueue, BlockedWaitersAreGrantedInTicketOrderAsReportsComeIn) {
  KeyRing ring({"a"});
  KeyQueue q(ring, {.gap_s = 0.001});
  // Pace the key: one release awaiting its status at a time.
  KeyQueue::Ticket t0;
  auto p = q.Acquire(&t0, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(p);
  ring.RateLimited(*p, 0.001);
  q.Report(*p, KeyQueue::Verdict::kRateLimited);
  KeyQueue::Ticket probe_t;
  auto out = q.Acquire(&probe_t, std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(out);

  constexpr int kWaiters = 5;
  std::vector<KeyQueue::Ticket> tickets(kWaiters);
  double wake;
  for (auto& t : tickets) EXPECT_FALSE(q.TryTake(&t, ring.Now(), &wake));  // join in this order
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  std::vector<KeyRing::Pick> granted;
  std::vector<std::thread> threads;
  // Started in reverse: the order of grants must come from the tickets.
  for (int i = kWaiters - 1; i >= 0; --i) {
    threads.emplace_back([&, i] {
      auto g = q.Acquire(&tickets[i], std::chrono::steady_clock::now() + std::chrono::seconds(30));
      ASSERT_TRUE(g);
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      granted.push_back(*g);
      cv.notify_all();
    });
  }
  KeyRing::Pick last = *out;
  for (int n = 1; n <= kWaiters; ++n) {
    q.Report(last, KeyQueue::Verdict::kOther);  // an answer, no growth: one at a time
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return int(order.size()) >= n; }));
    EXPECT_EQ(int(order.size()), n) << "one grant per report";
    last = granted.back();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace hone::route
