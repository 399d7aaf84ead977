// Residency on real models: lazy load, admission refusal, LRU eviction,
// keep_alive expiry, pinning and explicit unload.
#include "serve/model_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "testing/test_env.h"

namespace hone::serve {
namespace {

Registry TwoModels() {
  auto r = Registry::Build("",
                           {hone::testing::SharedModel("stories260K.gguf"),
                            hone::testing::SharedModel("tinystories-d256-l4-f32.gguf")},
                           {});
  EXPECT_TRUE(r.ok());
  return std::move(*r);
}

PoolOptions Small() {
  PoolOptions o;
  o.scheduler.slots = 1;
  o.scheduler.ctx_per_slot = 256;
  o.scheduler.threads = 1;
  return o;
}

bool Resident(const ModelPool& p, const std::string& name) {
  for (const auto& r : p.Resident()) {
    if (r.name == name) return true;
  }
  return false;
}

bool WaitUntilGone(const ModelPool& p, const std::string& name) {
  for (int i = 0; i < 100 && Resident(p, name); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !Resident(p, name);
}

TEST(ModelPoolTest, LoadsOnFirstAcquireAndReusesAfter) {
  Registry reg = TwoModels();
  Metrics metrics;
  ModelPool pool(reg, Small(), &metrics);
  EXPECT_TRUE(pool.Resident().empty());
  {
    auto a = pool.Acquire("stories260K");
    ASSERT_TRUE(a.ok()) << a.error().ToString();
    EXPECT_TRUE((*a)->just_loaded);
  }
  auto b = pool.Acquire("stories260K");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE((*b)->just_loaded);
  EXPECT_EQ(metrics.Get(metric::kLoads, "stories260K"), 1);
}

TEST(ModelPoolTest, AdmissionRefusesWhatCannotFit) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  o.memory_limit_bytes = 1 << 20;  // 1 MiB: smaller than either model
  ModelPool pool(reg, o, &metrics);
  auto a = pool.Acquire("stories260K");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(a.error().message.find("MiB"), std::string::npos);
  EXPECT_EQ(metrics.Get(metric::kLoadFailures, "stories260K"), 1);
}

// A board with a few GB: the refusal says which quantization would fit.
TEST(ModelPoolTest, RefusalNamesAQuantizationThatWouldFit) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  ModelPool probe(reg, o, &metrics);
  o.memory_limit_bytes = probe.EstimateBytes(reg.entries()[1]) - 1;  // the F32 d256 misses by a byte
  ModelPool pool(reg, o, &metrics);
  auto a = pool.Acquire("tinystories-d256-l4-f32");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(a.error().message.find("A Q8_0 of it would need about"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("--types q8_0"), std::string::npos) << a.error().message;
  EXPECT_EQ(a.error().message.find(reg.entries()[1].path), std::string::npos) << "a path in an API error";

  o.memory_limit_bytes = 1 << 20;  // less than the KV cache and buffers alone
  ModelPool tiny(reg, o, &metrics);
  auto b = tiny.Acquire("tinystories-d256-l4-f32");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("No smaller quantization of it would fit"), std::string::npos)
      << b.error().message;
  EXPECT_NE(b.error().message.find("fewer --slots or a smaller --ctx"), std::string::npos);
}

TEST(ModelPoolTest, EvictsTheLeastRecentlyUsedIdleModel) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  ModelPool probe(reg, o, &metrics);
  uint64_t small = probe.EstimateBytes(reg.entries()[0]), big = probe.EstimateBytes(reg.entries()[1]);
  o.memory_limit_bytes = small + big - 1;  // one at a time
  ModelPool pool(reg, o, &metrics);
  { ASSERT_TRUE(pool.Acquire("stories260K").ok()); }
  ASSERT_TRUE(Resident(pool, "stories260K"));
  { ASSERT_TRUE(pool.Acquire("tinystories-d256-l4-f32").ok()); }
  EXPECT_FALSE(Resident(pool, "stories260K"));
  EXPECT_TRUE(Resident(pool, "tinystories-d256-l4-f32"));
  // A busy model is never evicted: the other one is refused instead.
  auto busy = pool.Acquire("tinystories-d256-l4-f32");
  ASSERT_TRUE(busy.ok());
  auto refused = pool.Acquire("stories260K");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kOutOfMemory);
}

TEST(ModelPoolTest, TwoFirstLoadsUnderALimitThatFitsOneDoNotBothLoad) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  ModelPool probe(reg, o, &metrics);
  uint64_t small = probe.EstimateBytes(reg.entries()[0]), big = probe.EstimateBytes(reg.entries()[1]);
  o.memory_limit_bytes = small + big - 1;  // either fits, not both
  for (int round = 0; round < 5; ++round) {
    Metrics m;
    ModelPool pool(reg, o, &m);
    // Both start together and hold their leases, so neither can be evicted
    // for the other: only one may load.
    std::atomic<int> ready{0};
    Result<std::unique_ptr<Lease>> a = MakeError(ErrorCode::kInternal, "unset");
    Result<std::unique_ptr<Lease>> b = MakeError(ErrorCode::kInternal, "unset");
    auto go = [&](const char* name, Result<std::unique_ptr<Lease>>* out) {
      ++ready;
      while (ready.load() < 2) {
      }
      *out = pool.Acquire(name);
    };
    std::thread ta(go, "stories260K", &a), tb(go, "tinystories-d256-l4-f32", &b);
    ta.join();
    tb.join();
    ASSERT_NE(a.ok(), b.ok()) << "round " << round
                              << ": both loaded, or neither: " << (a.ok() ? "" : a.error().message) << " / "
                              << (b.ok() ? "" : b.error().message);
    const Error& refused = a.ok() ? b.error() : a.error();
    EXPECT_EQ(refused.code, ErrorCode::kOutOfMemory) << refused.message;
    EXPECT_EQ(pool.Resident().size(), 1u);
  }
}

TEST(ModelPoolTest, PinnedModelsStay) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  ModelPool probe(reg, o, &metrics);
  o.memory_limit_bytes = probe.EstimateBytes(reg.entries()[0]) + probe.EstimateBytes(reg.entries()[1]) - 1;
  o.pinned = {"stories260K"};
  o.default_keep_alive_s = 0;
  ModelPool pool(reg, o, &metrics);
  { ASSERT_TRUE(pool.Acquire("stories260K").ok()); }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(Resident(pool, "stories260K"));  // keep_alive 0 does not apply to a pin
  auto other = pool.Acquire("tinystories-d256-l4-f32");
  EXPECT_FALSE(other.ok());
  ASSERT_TRUE(pool.SetPinned("stories260K", false).ok());
  EXPECT_TRUE(pool.Acquire("tinystories-d256-l4-f32").ok());
}

TEST(ModelPoolTest, KeepAliveExpiryAndExplicitUnload) {
  Registry reg = TwoModels();
  Metrics metrics;
  ModelPool pool(reg, Small(), &metrics);
  { ASSERT_TRUE(pool.Acquire("stories260K", 1.0).ok()); }
  EXPECT_TRUE(Resident(pool, "stories260K"));
  EXPECT_TRUE(WaitUntilGone(pool, "stories260K"));
  // The reaper takes the model out of the listing first, then frees it and
  // counts the unload: give that a moment (it raced in CI).
  for (int i = 0; i < 100 && metrics.Get(metric::kUnloads, "stories260K") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(metrics.Get(metric::kUnloads, "stories260K"), 1);

  { ASSERT_TRUE(pool.Acquire("stories260K", -1.0).ok()); }  // forever
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(Resident(pool, "stories260K"));
  EXPECT_TRUE(pool.Unload("stories260K").ok());
  EXPECT_FALSE(Resident(pool, "stories260K"));
  EXPECT_EQ(pool.Unload("stories260K").error().code, ErrorCode::kNotFound);
}

// A corrupt model (its header reads, its tensors are cut) fails once and is
// then refused at once, without loading again, until its file changes.
TEST(ModelPoolTest, AFailedLoadIsRememberedUntilTheFileChanges) {
  const std::string good = hone::testing::SharedModel("stories260K.gguf");
  const std::string bad = hone::testing::TempPath("pool-cut-model.gguf");
  {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  }
  auto reg = Registry::Build("", {bad}, {});
  ASSERT_TRUE(reg.ok()) << reg.error().ToString();
  Metrics metrics;
  ModelPool pool(*reg, Small(), &metrics);
  auto first = pool.Acquire("pool-cut-model");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(metrics.Get(metric::kLoadFailures, "pool-cut-model"), 1);
  auto again = pool.Acquire("pool-cut-model");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, first.error().code);
  EXPECT_NE(again.error().message.find("not retried for"), std::string::npos) << again.error().message;
  EXPECT_GT(again.error().retry_after_s, 0);
  EXPECT_EQ(metrics.Get(metric::kLoadFailures, "pool-cut-model"), 1);  // no second load
  // The file is replaced by a good copy: tried, and loaded, at once.
  {
    std::ifstream in(good, std::ios::binary);
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << in.rdbuf();
  }
  auto fixed = pool.Acquire("pool-cut-model");
  ASSERT_TRUE(fixed.ok()) << fixed.error().ToString();
}

TEST(ModelPoolTest, WaitersForOneLoadAreBounded) {
  Registry reg = TwoModels();
  Metrics metrics;
  PoolOptions o = Small();
  o.max_load_waiters = 0;  // every Acquire counts itself first: 0 refuses all
  ModelPool pool(reg, o, &metrics);
  auto r = pool.Acquire("stories260K");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_NE(r.error().message.find("wait for 'stories260K' to load"), std::string::npos) << r.error().message;
}

#ifdef HONE_HAVE_TUNE
}  // namespace
}  // namespace hone::serve

#include <cstdlib>

#include "hw/probe.h"
#include "tune/profile.h"

namespace hone::serve {
namespace {

TEST(ModelPoolTest, TunedProfileChoosesSlotsUnlessGiven) {
  std::string dir = hone::testing::TempPath("serve_profiles");
  setenv("HONE_PROFILE_DIR", dir.c_str(), 1);
  std::string model = hone::testing::SharedModel("stories260K.gguf");
  hw::ProbeOptions po;
  po.measure_bandwidth = false;
  tune::Profile p;
  p.fingerprint = hw::Fingerprint(*hw::Probe(po));
  p.model_hash = *tune::ModelHash(model);
  p.workload = "server";
  p.concurrency = 3;
  p.config.threads = p.config.threads_batch = 1;
  p.config.n_parallel = 3;
  ASSERT_TRUE(tune::SaveProfile(p, tune::ProfilePath(p.fingerprint, p.model_hash)).ok());
  Registry reg = TwoModels();
  Metrics metrics;
  {
    ModelPool pool(reg, Small(), &metrics);
    auto lease = pool.Acquire("stories260K");
    ASSERT_TRUE(lease.ok()) << lease.error().ToString();
    EXPECT_EQ((**lease)->scheduler->options().slots, 3);
    EXPECT_FALSE((**lease)->profile.empty());
  }
  PoolOptions explicit_slots = Small();
  explicit_slots.slots_explicit = true;
  ModelPool pool(reg, explicit_slots, &metrics);
  auto lease = pool.Acquire("stories260K");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((**lease)->scheduler->options().slots, 1);
  unsetenv("HONE_PROFILE_DIR");
}
#endif  // HONE_HAVE_TUNE

}  // namespace
}  // namespace hone::serve
