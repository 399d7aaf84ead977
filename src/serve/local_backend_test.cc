// The local engine through the Backend interface, on a real model
// (stories260K): choices in order with usage, refusals as HTTP-free errors,
// embeddings with cancellation.
#include "serve/local_backend.h"

#include <gtest/gtest.h>

#include "testing/test_env.h"

namespace hone::serve {
namespace {

using Kind = CompletionEvent::Kind;

struct Fixture {
  Registry registry = [] {
    auto r = Registry::Build("", {hone::testing::SharedModel("stories260K.gguf")}, {});
    EXPECT_TRUE(r.ok());
    return std::move(*r);
  }();
  Metrics metrics;
  ModelPool pool;
  LocalBackend backend;
  explicit Fixture(int max_queue = 64)
      : pool(registry, Options(max_queue), &metrics), backend(pool, metrics, 60, 1) {}
  static PoolOptions Options(int max_queue) {
    PoolOptions o;
    o.scheduler.slots = 1;
    o.scheduler.ctx_per_slot = 256;
    o.scheduler.threads = 1;
    o.scheduler.max_queue = max_queue;
    o.use_profiles = false;
    return o;
  }
};

GenerationRequest Greedy(std::vector<std::string> prompts, int max_tokens) {
  GenerationRequest r;
  r.model = "stories260K";
  r.prompts = std::move(prompts);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

TEST(LocalBackendTest, ReadsEveryChoiceInOrderWithUsage) {
  Fixture f;
  auto run = f.backend.Start(Greedy({"Once upon a time", "The cat"}, 5));
  ASSERT_TRUE(run.ok()) << run.error().ToString();
  ASSERT_EQ((*run)->choices(), 2u);
  EXPECT_EQ((*run)->model(), "stories260K");
  std::vector<std::string> text(2);
  std::vector<ChoiceResult> ends;
  for (;;) {
    CompletionEvent e = (*run)->Next(Clock::now() + std::chrono::seconds(1));
    if (e.kind == Kind::kDone) break;
    if (e.kind == Kind::kText) text.at(e.choice) += e.text;
    if (e.kind == Kind::kChoiceEnd) {
      EXPECT_EQ(e.choice, ends.size()) << "choices end in order";
      ends.push_back(e.result);
    }
  }
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& r : ends) {
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_EQ(r.usage.completion_tokens, 5);
    EXPECT_GT(r.usage.prompt_tokens, 0);
    EXPECT_TRUE(r.ttft_s.has_value());
  }
  EXPECT_FALSE(text[0].empty());
  EXPECT_FALSE(text[1].empty());
}

TEST(LocalBackendTest, RefusalsAreErrorValuesWithoutHttp) {
  Fixture f(/*max_queue=*/0);
  auto unknown = f.backend.Start([] {
    auto r = Greedy({"x"}, 2);
    r.model = "no-such-model";
    return r;
  }());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);

  // A schema it cannot enforce is the client's error, found before any load.
  auto bad = Greedy({"x"}, 2);
  bad.format = {ResponseFormat::Type::kJsonSchema, nlohmann::json::parse(R"({"$ref": "http://far/away"})")};
  auto refused = f.backend.Start(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(f.pool.Resident().empty());

  // One slot, no queue: a second request while the first runs is kBusy.
  auto first = f.backend.Start(Greedy({"Once upon a time"}, 200));
  ASSERT_TRUE(first.ok());
  // Its first text means it holds the slot.
  for (Kind k = Kind::kIdle; k == Kind::kIdle;)
    k = (*first)->Next(Clock::now() + std::chrono::seconds(1)).kind;
  auto busy = f.backend.Start(Greedy({"x"}, 2));
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, ErrorCode::kBusy);
  EXPECT_EQ(busy.error().retry_after_s, 1);
}

TEST(LocalBackendTest, DestroyingTheReaderCancelsTheWork) {
  Fixture f;
  {
    auto run = f.backend.Start(Greedy({"Once upon a time"}, 200));
    ASSERT_TRUE(run.ok());
    (*run)->Next(Clock::now() + std::chrono::seconds(1));
  }
  // The one slot frees within a step: the next request runs to its end.
  auto next = f.backend.Start(Greedy({"The cat"}, 2));
  ASSERT_TRUE(next.ok());
  CompletionEvent e;
  do e = (*next)->Next(Clock::now() + std::chrono::seconds(5));
  while (e.kind != Kind::kChoiceEnd);
  EXPECT_TRUE(e.result.ok());
}

TEST(LocalBackendTest, EmbedsAndStopsWhenCancelled) {
  Fixture f;
  auto e = f.backend.Embed({"stories260K", {"one", "two"}, std::nullopt}, [] { return false; });
  ASSERT_TRUE(e.ok()) << e.error().ToString();
  EXPECT_EQ(e->vectors.size(), 2u);
  EXPECT_GT(e->prompt_tokens, 0);
  auto stopped = f.backend.Embed({"stories260K", {"one"}, std::nullopt}, [] { return true; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().code, ErrorCode::kAborted);
}

}  // namespace
}  // namespace hone::serve
