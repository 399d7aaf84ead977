// The local engine through the Backend interface, on a real model
// (stories260K): choices in order with usage, refusals as HTTP-free errors,
// embeddings with cancellation.
#include "serve/local_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

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

// Embeddings share the cores with the scheduler: while one is admitted, its
// tokens are work ahead in both forecasts, a full embedding queue is seen
// before sending, and it all goes once the texts are done.
TEST(LocalBackendTest, EmbeddingWorkAheadIsInTheForecasts) {
  Fixture f(/*max_queue=*/0);  // one embedding at a time, none waiting
  ASSERT_TRUE(f.backend.Embed({"stories260K", {"warm up"}, std::nullopt}, [] { return false; }).ok());
  const GenerationRequest gen = Greedy({"Once upon a time"}, 4);
  const EmbeddingRequest probe{"stories260K", {"a short one"}, std::nullopt};
  const auto idle_gen = f.backend.Predict(gen);
  const auto idle_embed = f.backend.PredictEmbed(probe);
  ASSERT_TRUE(idle_gen.loaded && idle_embed.loaded);
  EXPECT_EQ(idle_gen.embed_s, 0);
  EXPECT_EQ(idle_embed.tokens_ahead, 0);
  EXPECT_FALSE(idle_embed.queue_full);
  EXPECT_GT(idle_embed.tokens, 0);
  EXPECT_GT(idle_embed.seconds, 0);

  // An embedding held at its first stop check: admitted, running, not done.
  std::promise<void> inside, release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<bool> first{true};
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat ";
  std::thread held([&] {
    auto e = f.backend.Embed({"stories260K", {text, text}, std::nullopt}, [&] {
      if (first.exchange(false)) {
        inside.set_value();
        go.wait();
      }
      return false;
    });
    EXPECT_TRUE(e.ok());
  });
  inside.get_future().wait();
  const auto busy_gen = f.backend.Predict(gen);
  const auto busy_embed = f.backend.PredictEmbed(probe);
  auto refused = f.backend.Embed(probe, [] { return false; });
  release.set_value();
  held.join();

  EXPECT_GT(busy_embed.tokens_ahead, 2 * 40 * 5) << "both texts' tokens are ahead";
  EXPECT_TRUE(busy_embed.queue_full) << "no room to wait: Embed would refuse";
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kBusy);
  EXPECT_GT(busy_embed.seconds, idle_embed.seconds * 10);
  EXPECT_GT(busy_gen.embed_s, 0);
  EXPECT_LE(busy_gen.embed_s, busy_gen.load.ttft_s / 2 + 1e-12) << "at most the first token's own work";
  EXPECT_GT(busy_gen.load.ttft_s, idle_gen.load.ttft_s);

  const auto after = f.backend.PredictEmbed(probe);
  EXPECT_EQ(after.tokens_ahead, 0) << "done texts are no longer ahead";
  EXPECT_FALSE(after.queue_full);
}

// The prompt tokens an answer reports, read to its end.
int PromptTokensOf(Result<std::unique_ptr<Completion>> run) {
  EXPECT_TRUE(run.ok()) << run.error().ToString();
  if (!run.ok()) return -1;
  int tokens = -1;
  for (;;) {
    CompletionEvent e = (*run)->Next(Clock::now() + std::chrono::seconds(1));
    if (e.kind == Kind::kDone) break;
    if (e.kind == Kind::kChoiceEnd) tokens = e.result.usage.prompt_tokens;
  }
  return tokens;
}

GenerationRequest ChatOf(std::string text) {
  GenerationRequest r = Greedy({}, 2);
  r.chat = true;
  r.messages.push_back({"user", std::move(text)});
  return r;
}

// A routed request is forecast and then started: Start takes the prompt
// Predict rendered (one template render, not two), but only for the model
// instance it was rendered for.
TEST(LocalBackendTest, StartUsesThePromptItsForecastRenderedForTheSameModelInstance) {
  Fixture f;
  const GenerationRequest short_chat = ChatOf("Hi"), long_chat = ChatOf("Once upon a time there was a big red dog");
  const int short_tokens = PromptTokensOf(f.backend.Start(short_chat));  // loads the model
  const int long_tokens = PromptTokensOf(f.backend.Start(long_chat));
  ASSERT_GT(long_tokens, short_tokens);

  const LocalBackend::Forecast forecast = f.backend.Predict(long_chat);
  ASSERT_TRUE(forecast.loaded);
  ASSERT_NE(forecast.prepared, nullptr);
  EXPECT_EQ(static_cast<int>(forecast.prepared->chat.tokens.size()), long_tokens);
  // What was prepared is what runs: handed the long chat's prompt, a start
  // of the short one prefills the long one.
  EXPECT_EQ(PromptTokensOf(f.backend.Start(short_chat, forecast.prepared)), long_tokens);
  EXPECT_EQ(PromptTokensOf(f.backend.Start(short_chat, nullptr)), short_tokens);

  // Once the model is unloaded and loaded again, the old prompt is not reused.
  ASSERT_TRUE(f.pool.Unload("stories260K").ok());
  EXPECT_EQ(PromptTokensOf(f.backend.Start(short_chat, forecast.prepared)), short_tokens);
}

}  // namespace
}  // namespace hone::serve
