// The scheduler on a real tiny model: continuous batching, chunked prefill,
// prefix reuse, cancellation, the bounded queue and grammar-constrained output.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "serve/json_grammar.h"
#include "testing/test_env.h"

namespace hone::serve {
namespace {

using engine::Token;

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = engine::Model::Load(hone::testing::SharedModel("stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    model_ = *m;
  }
  static void TearDownTestSuite() { model_.reset(); }

  std::unique_ptr<Scheduler> Make(SchedulerOptions o) {
    // One decode thread: CTest runs two tests at once on a 2-core machine,
    // and two 2-thread decoders then spin in ggml's barriers waiting for each
    // other's descheduled threads (a 200-token test took 60 s instead of 0.3).
    o.threads = 1;
    auto s = Scheduler::Create(model_, o, &metrics_, "stories");
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::vector<Token> Prompt(const std::string& text) {
    engine::Tokenizer tok(*model_);
    return *tok.Encode(text, true, false);
  }
  std::shared_ptr<Job> NewJob(const std::string& text, int max_tokens, std::string grammar = "") {
    engine::SamplingOptions s;
    s.temperature = 0;
    s.grammar = std::move(grammar);
    return std::make_shared<Job>(Prompt(text), max_tokens, s, std::vector<std::string>{},
                                 Clock::now() + std::chrono::seconds(60));
  }

  static std::shared_ptr<engine::Model> model_;
  Metrics metrics_;
};
std::shared_ptr<engine::Model> SchedulerTest::model_;

TEST_F(SchedulerTest, OneDecodeStepCarriesEveryActiveSequence) {
  auto s = Make({.slots = 4, .ctx_per_slot = 256});
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(NewJob("Once upon a time " + std::to_string(i), 24));
    ASSERT_EQ(*s->Submit(jobs.back()), SubmitResult::kOk);
  }
  for (auto& j : jobs) {
    std::string text = j->WaitAll();
    JobResult r = j->result();
    EXPECT_EQ(r.finish, Finish::kLength);
    EXPECT_EQ(r.completion_tokens, 24);
    EXPECT_FALSE(text.empty());
  }
  EXPECT_EQ(s->max_seqs_per_step(), 4);
  // Lock-step decoding: far fewer steps than the 96 tokens produced.
  EXPECT_LT(s->steps(), 60);
  EXPECT_TRUE(s->idle());
}

TEST_F(SchedulerTest, BatchedGreedyOutputEqualsAloneOutput) {
  auto s = Make({.slots = 3, .ctx_per_slot = 256});
  auto alone = NewJob("The little dog", 16);
  ASSERT_EQ(*s->Submit(alone), SubmitResult::kOk);
  std::string expected = alone->WaitAll();
  auto a = NewJob("A big red ball", 16), b = NewJob("The little dog", 16), c = NewJob("Tom was", 16);
  for (auto& j : {a, b, c}) ASSERT_EQ(*s->Submit(j), SubmitResult::kOk);
  a->WaitAll();
  EXPECT_EQ(b->WaitAll(), expected);
  c->WaitAll();
}

// Slots in one shared KV stream or one stream each: the same greedy text,
// also when short jobs end early and leave gaps between the running slots.
TEST_F(SchedulerTest, SharedAndSeparateKvStreamsGiveTheSameText) {
  const std::vector<std::pair<std::string, int>> work = {
      {"A big red ball", 40}, {"The little dog", 6}, {"Tom was", 40}, {"Lily saw a cat", 9}, {"One day", 30}};
  std::vector<std::string> texts[2];
  for (bool unified : {false, true}) {
    auto s =
        Make({.slots = 4, .ctx_per_slot = 256, .kv_unified = unified ? KvUnified::kOn : KvUnified::kOff});
    std::vector<std::shared_ptr<Job>> jobs;
    for (const auto& [prompt, n] : work) {
      jobs.push_back(NewJob(prompt, n));
      ASSERT_EQ(*s->Submit(jobs.back()), SubmitResult::kOk);
    }
    for (auto& j : jobs) texts[unified].push_back(j->WaitAll());
  }
  for (size_t i = 0; i < work.size(); ++i) {
    EXPECT_FALSE(texts[0][i].empty()) << work[i].first;
    EXPECT_EQ(texts[0][i], texts[1][i]) << work[i].first;
  }
}

// The stop string that ended a job is reported (Anthropic's stop_sequence).
TEST_F(SchedulerTest, AStopStringEndsTheJobAndIsReported) {
  auto s = Make({.slots = 1, .ctx_per_slot = 256});
  auto free_run = NewJob("Once upon a time", 32);
  ASSERT_EQ(*s->Submit(free_run), SubmitResult::kOk);
  const std::string text = free_run->WaitAll();
  EXPECT_EQ(free_run->result().stop_sequence, "");
  // A word from the middle of that greedy story.
  const size_t at = text.find(' ', text.size() / 2);
  ASSERT_NE(at, std::string::npos) << text;
  const size_t end = text.find(' ', at + 1);
  const std::string word = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  engine::SamplingOptions greedy;
  greedy.temperature = 0;
  auto stopped =
      std::make_shared<Job>(Prompt("Once upon a time"), 32, greedy, std::vector<std::string>{"zzz", word},
                            Clock::now() + std::chrono::seconds(60));
  ASSERT_EQ(*s->Submit(stopped), SubmitResult::kOk);
  EXPECT_EQ(stopped->WaitAll(), text.substr(0, text.find(word)));
  EXPECT_EQ(stopped->result().finish, Finish::kStop);
  EXPECT_EQ(stopped->result().stop_sequence, word);
}

TEST_F(SchedulerTest, SharedPrefixIsReusedFromTheCache) {
  auto s = Make({.slots = 1, .ctx_per_slot = 256});
  const std::string system = "Once upon a time there was a girl named Lily who loved the sun.";
  auto first = NewJob(system + " She", 4);
  ASSERT_EQ(*s->Submit(first), SubmitResult::kOk);
  first->WaitAll();
  EXPECT_EQ(first->result().cached_tokens, 0);
  auto second = NewJob(system + " He", 4);
  ASSERT_EQ(*s->Submit(second), SubmitResult::kOk);
  second->WaitAll();
  int shared = static_cast<int>(Prompt(system).size());
  EXPECT_GE(second->result().cached_tokens, shared - 1);
  EXPECT_LT(second->result().cached_tokens, second->result().prompt_tokens);
}

TEST_F(SchedulerTest, SharedPrefixIsCopiedFromABusySlot) {
  auto s = Make({.slots = 2, .ctx_per_slot = 4096});
  std::string system = "Once upon a time there was a girl named Lily who loved the sun and the sea.";
  system += " Every morning she ran to the beach with her dog Max and her friend Tom.";
  // The first job generates until cancelled, so it holds its slot throughout.
  auto first = NewJob(system + " She", -1);
  ASSERT_EQ(*s->Submit(first), SubmitResult::kOk);
  bool done = false;
  while (first->Take(std::chrono::milliseconds(50), &done).empty() && !done) {
  }
  ASSERT_FALSE(done);
  // The second gets the other slot and a copy of the shared prefix, and must
  // answer exactly as it would alone.
  auto second = NewJob(system + " He", 8);
  ASSERT_EQ(*s->Submit(second), SubmitResult::kOk);
  std::string copied = second->WaitAll();
  first->Cancel();
  first->WaitAll();
  int shared = static_cast<int>(Prompt(system).size());
  EXPECT_GE(second->result().cached_tokens, shared - 1);
  auto alone_sched = Make({.slots = 1, .ctx_per_slot = 256});
  auto alone = NewJob(system + " He", 8);
  ASSERT_EQ(*alone_sched->Submit(alone), SubmitResult::kOk);
  EXPECT_EQ(copied, alone->WaitAll());
  EXPECT_EQ(alone->result().cached_tokens, 0);
}

TEST_F(SchedulerTest, CancelStopsTheSequenceWithinAStep) {
  auto s = Make({.slots = 2, .ctx_per_slot = 1024});
  auto job = NewJob("Once upon a time", -1);
  ASSERT_EQ(*s->Submit(job), SubmitResult::kOk);
  bool done = false;
  std::string got;
  while (got.size() < 8 && !done) got += job->Take(std::chrono::milliseconds(100), &done);
  ASSERT_FALSE(done);
  long at_cancel = s->steps();
  job->Cancel();
  job->WaitAll();
  EXPECT_EQ(job->result().finish, Finish::kCancelled);
  EXPECT_LE(s->steps() - at_cancel, 1);
  EXPECT_LT(job->result().completion_tokens, 900);
}

TEST_F(SchedulerTest, LongPromptIsPrefilledInChunksBesideRunningStreams) {
  auto s = Make({.slots = 2, .ctx_per_slot = 1024, .batch = 64, .prefill_chunk = 8});
  auto runner = NewJob("Once upon a time", 200);
  ASSERT_EQ(*s->Submit(runner), SubmitResult::kOk);
  bool done = false;
  while (runner->Take(std::chrono::milliseconds(50), &done).empty() && !done) {
  }
  std::string long_text;
  for (int i = 0; i < 30; ++i) long_text += "The cat sat on the mat. ";
  auto big = NewJob(long_text, 1);
  size_t n_prompt = big->prompt.size();
  long before = s->steps();
  ASSERT_EQ(*s->Submit(big), SubmitResult::kOk);
  big->WaitAll();
  // At most 8 prompt tokens per step while the runner streams: many small steps.
  EXPECT_GE(s->steps() - before, static_cast<long>(n_prompt / 8));
  EXPECT_EQ(s->max_seqs_per_step(), 2);
  runner->WaitAll();
  EXPECT_EQ(runner->result().finish, Finish::kLength);
  EXPECT_EQ(big->result().finish, Finish::kLength);
}

TEST_F(SchedulerTest, QueueBeyondItsBoundIsRefused) {
  auto s = Make({.slots = 1, .ctx_per_slot = 1024, .max_queue = 1});
  std::vector<std::shared_ptr<Job>> jobs;
  bool refused = false;
  for (int i = 0; i < 4 && !refused; ++i) {
    jobs.push_back(NewJob("Once upon a time", 500));
    refused = *s->Submit(jobs.back()) == SubmitResult::kQueueFull;
  }
  EXPECT_TRUE(refused);
  for (auto& j : jobs) j->Cancel();
}

// Places held by requests still preparing count as taken: once the queue
// and the slots are spoken for, the next request is refused before it
// prepares, and a place given back is free again.
TEST_F(SchedulerTest, HeldPlacesCountAsTakenUntilUsedOrGivenBack) {
  auto s = Make({.slots = 1, .ctx_per_slot = 1024, .max_queue = 1});
  QueuePlace a = s->HoldPlace(), b = s->HoldPlace();  // the free slot, and the one queue place
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_FALSE(s->HoldPlace());
  EXPECT_TRUE(s->QueueFull());
  EXPECT_TRUE(s->Forecast(Prompt("Once upon a time"), 5).queue_full);
  // Without a place, a job finds no room; with one, it takes its place.
  auto extra = NewJob("Once upon a time", 5);
  EXPECT_EQ(*s->Submit(extra), SubmitResult::kQueueFull);
  auto runner = NewJob("Once upon a time", -1);
  ASSERT_EQ(*s->Submit(runner, &a), SubmitResult::kOk);
  EXPECT_FALSE(a);  // used up
  EXPECT_FALSE(s->HoldPlace());
  { QueuePlace given_back = std::move(b); }
  QueuePlace c = s->HoldPlace();
  EXPECT_TRUE(c);
  auto waiting = NewJob("Once upon a time", 5);
  ASSERT_EQ(*s->Submit(waiting, &c), SubmitResult::kOk);
  EXPECT_EQ(*s->Submit(NewJob("Once upon a time", 5)), SubmitResult::kQueueFull);
  runner->Cancel();
  runner->WaitAll();
  waiting->WaitAll();
  EXPECT_EQ(waiting->result().finish, Finish::kLength);
  EXPECT_TRUE(s->HoldPlace());
}

// A queued job whose client left (or whose deadline passed) gives its queue
// place back at the next step, while the one slot is still busy.
TEST_F(SchedulerTest, AbandonedQueuedJobsFreeTheirPlace) {
  auto s = Make({.slots = 1, .ctx_per_slot = 1024, .max_queue = 1});
  auto runner = NewJob("Once upon a time", -1);  // holds the slot until cancelled
  ASSERT_EQ(*s->Submit(runner), SubmitResult::kOk);
  bool done = false;
  while (runner->Take(std::chrono::milliseconds(50), &done).empty() && !done) {
  }
  auto waiting = NewJob("Once upon a time", 5);
  ASSERT_EQ(*s->Submit(waiting), SubmitResult::kOk);
  EXPECT_EQ(*s->Submit(NewJob("Once upon a time", 5)), SubmitResult::kQueueFull);
  waiting->Cancel();
  waiting->WaitAll();  // ends while the runner still holds the slot
  EXPECT_EQ(waiting->result().finish, Finish::kCancelled);
  EXPECT_EQ(s->waiting(), 0);
  EXPECT_EQ(s->active(), 1);
  // Its place is free again; and a job whose deadline passes while it waits ends as a timeout.
  engine::SamplingOptions greedy;
  greedy.temperature = 0;
  auto late = std::make_shared<Job>(Prompt("Once upon a time"), 5, greedy, std::vector<std::string>{},
                                    Clock::now() + std::chrono::milliseconds(1));
  ASSERT_EQ(*s->Submit(late), SubmitResult::kOk);
  late->WaitAll();
  EXPECT_EQ(late->result().finish, Finish::kTimeout);
  EXPECT_EQ(s->active(), 1);
  runner->Cancel();
  runner->WaitAll();
}

// A step whose batched decode fails is retried one sequence at a time before
// any sequence fails: real llama.cpp refuses the whole batch when one
// sequence carries a token outside the vocabulary, and only that sequence
// may fail. The stream beside it goes on, unchanged.
TEST_F(SchedulerTest, ADecodeFailureFailsOnlyTheSequenceThatCausedIt) {
  auto s = Make({.slots = 2, .ctx_per_slot = 256});
  auto alone = NewJob("The little dog", 200);
  ASSERT_EQ(*s->Submit(alone), SubmitResult::kOk);
  const std::string expected = alone->WaitAll();
  ASSERT_EQ(metrics_.Get(metric::kDecodeRetries, "stories"), 0);

  auto good = NewJob("The little dog", 200);
  ASSERT_EQ(*s->Submit(good), SubmitResult::kOk);
  std::string got;
  bool done = false;
  while (got.empty() && !done) got += good->Take(std::chrono::milliseconds(100), &done);
  std::vector<Token> bad_prompt = Prompt("Tom was");
  bad_prompt.insert(bad_prompt.begin() + 1, static_cast<Token>(model_->info().n_vocab + 7));
  engine::SamplingOptions greedy;
  greedy.temperature = 0;
  auto bad = std::make_shared<Job>(bad_prompt, 8, greedy, std::vector<std::string>{},
                                   Clock::now() + std::chrono::seconds(60));
  ASSERT_EQ(*s->Submit(bad), SubmitResult::kOk);
  bad->WaitAll();
  // Both were in the failed step: the good stream was still running.
  EXPECT_EQ(good->result().finish, Finish::kNone);
  EXPECT_EQ(bad->result().finish, Finish::kError);
  EXPECT_NE(bad->result().error.find("decode failed"), std::string::npos) << bad->result().error;
  got += good->WaitAll();
  EXPECT_EQ(good->result().finish, Finish::kLength);
  EXPECT_EQ(good->result().completion_tokens, 200);
  EXPECT_EQ(got, expected);
  EXPECT_GE(metrics_.Get(metric::kDecodeRetries, "stories"), 1);
  // The slot that failed serves the next request.
  auto after = NewJob("The little dog", 200);
  ASSERT_EQ(*s->Submit(after), SubmitResult::kOk);
  EXPECT_EQ(after->WaitAll(), expected);
}

TEST_F(SchedulerTest, PromptLongerThanTheSlotIsAnError) {
  auto s = Make({.slots = 1, .ctx_per_slot = 256});
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the cat and the dog ";
  auto r = s->Submit(NewJob(text, 4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(SchedulerTest, GrammarConstrainsOutputToTheSchema) {
  auto s = Make({.slots = 1, .ctx_per_slot = 256});
  auto g = JsonSchemaGrammar(nlohmann::json::parse(
      R"({"type":"object","properties":{"mood":{"enum":["happy","sad"]},"age":{"type":"integer"}}})"));
  ASSERT_TRUE(g.ok());
  auto job = NewJob("Lily was", 48, *g);
  ASSERT_EQ(*s->Submit(job), SubmitResult::kOk);
  std::string text = job->WaitAll();
  auto j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  EXPECT_TRUE(j["mood"] == "happy" || j["mood"] == "sad") << text;
  EXPECT_TRUE(j["age"].is_number_integer()) << text;
}

TEST_F(SchedulerTest, GrammarFollowsReferencesAndAlternatives) {
  auto s = Make({.slots = 1, .ctx_per_slot = 256});
  auto g = JsonSchemaGrammar(nlohmann::json::parse(R"({
      "$defs": {"pet": {"type": "object", "required": ["kind"],
                        "properties": {"kind": {"enum": ["cat", "dog"]}, "age": {"type": "integer"}}}},
      "type": "object",
      "properties": {"pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 2},
                     "owner": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 12}]}}})"));
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  auto job = NewJob("Lily had a pet", 96, *g);
  ASSERT_EQ(*s->Submit(job), SubmitResult::kOk);
  std::string text = job->WaitAll();
  auto j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  ASSERT_TRUE(j["pets"].is_array()) << text;
  EXPECT_LE(j["pets"].size(), 2u) << text;
  for (const auto& p : j["pets"]) EXPECT_TRUE(p["kind"] == "cat" || p["kind"] == "dog") << text;
  EXPECT_TRUE(j["owner"].is_null() || (j["owner"].is_string() && j["owner"].get<std::string>().size() <= 12))
      << text;
}

TEST_F(SchedulerTest, ForecastSeesTheQueueTheCachedPrefixAndAFullQueue) {
  auto s = Make({.slots = 1, .ctx_per_slot = 512, .max_queue = 2});
  const std::string system =
      "Once upon a time there was a little girl named Lily who loved to play in the park. ";
  // Idle: a short wait, nothing cached yet.
  LoadForecast idle = s->Forecast(Prompt(system + "She"), 16);
  EXPECT_EQ(idle.waiting, 0);
  EXPECT_FALSE(idle.queue_full);
  EXPECT_EQ(idle.cached_tokens, 0);
  EXPECT_GT(idle.ttft_s, 0);
  // Serve one request with the shared prefix: its prompt stays in the KV.
  auto first = NewJob(system + "She", 4);
  ASSERT_EQ(*s->Submit(first), SubmitResult::kOk);
  first->WaitAll();
  LoadForecast warm = s->Forecast(Prompt(system + "He"), 16);
  EXPECT_GT(warm.cached_tokens, 10) << "the shared prefix is already in the slot";
  EXPECT_LT(warm.uncached_tokens, idle.uncached_tokens);
  EXPECT_GT(warm.prefill_tps, 0);
  EXPECT_GT(warm.step_s, 0);
  // One long request running and two waiting: a new one waits behind three
  // answers, and the queue (max 2) is full.
  std::vector<std::shared_ptr<Job>> busy;
  for (int i = 0; i < 3; ++i) {
    busy.push_back(NewJob("Tom had a red ball " + std::to_string(i), 200));
    ASSERT_EQ(*s->Submit(busy.back()), SubmitResult::kOk);
  }
  for (int i = 0; i < 200 && s->active() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  LoadForecast loaded = s->Forecast(Prompt(system + "He"), 16);
  EXPECT_EQ(loaded.waiting, 2);
  EXPECT_TRUE(loaded.queue_full);
  EXPECT_GT(loaded.ttft_s, warm.ttft_s + 100 * loaded.step_s) << "behind at least two 200-token answers";
  for (auto& j : busy) j->Cancel();
  for (auto& j : busy) j->WaitAll();
}

// A conversation's next turn prefills a few tokens past its cached prefix. That
// step is mostly a step's fixed cost: it must not make every prompt token look
// as dear, or the next long prompt's forecast comes out many times too slow
// (and a local_first route sends it to the cloud for nothing). On a model
// with Qwen2's 152k-token vocabulary the fixed part (the output layer) is large.
TEST_F(SchedulerTest, ShortTurnsPastACachedPrefixDoNotSkewThePrefillRate) {
  auto m = engine::Model::Load(hone::testing::TinySynthModel());
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  SchedulerOptions o{.slots = 1, .ctx_per_slot = 1024};
  o.threads = 1;
  auto s = Scheduler::Create(*m, o, &metrics_, "tiny");
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  engine::Tokenizer tok(**m);
  auto ask = [&](const std::string& text) {
    engine::SamplingOptions greedy;
    greedy.temperature = 0;
    auto j = std::make_shared<Job>(*tok.Encode(text, true, false), 4, greedy, std::vector<std::string>{},
                                   Clock::now() + std::chrono::seconds(60));
    ASSERT_EQ(*(*s)->Submit(j), SubmitResult::kOk);
    j->WaitAll();
  };
  std::string story;
  for (int i = 0; i < 30; ++i) story += "Tom and Lily went to the park to play with a big red ball. ";
  ask("Once upon a time");  // a first decode step, measured
  // Long prompts, each new from its first token: the rate to keep (the
  // estimate is an average that needs a few of them to settle).
  for (int i = 0; i < 16; ++i) ask(std::to_string(i) + " " + story + "Then");
  const double measured = (*s)->Forecast({}, 0).prefill_tps;
  for (int i = 0; i < 8; ++i) ask("15 " + story + "Then the dog " + std::to_string(i));
  const double after = (*s)->Forecast({}, 0).prefill_tps;
  EXPECT_GT(after, measured / 2) << "measured " << measured << " tok/s after the long prompts";
}

}  // namespace
}  // namespace hone::serve
