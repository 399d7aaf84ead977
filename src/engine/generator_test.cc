// Generation on real models: a trained story model and random-weight fixtures.
#include "engine/generator.h"

#include <gtest/gtest.h>
#include <sched.h>

#include "engine/batch_decoder.h"
#include "engine/embedder.h"
#include "engine/utf8.h"
#include "testing/test_env.h"

namespace hone::engine {
namespace {

std::shared_ptr<Model> LoadOrDie(const std::string& path) {
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().ToString());
  return m.ok() ? *m : nullptr;
}

std::unique_ptr<Session> NewSession(std::shared_ptr<Model> m, uint32_t n_seq = 1, bool embeddings = false) {
  SessionOptions o;
  o.n_ctx = 512 * n_seq;
  o.n_seq_max = n_seq;
  o.embeddings = embeddings;
  auto s = Session::Create(std::move(m), o);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().ToString());
  return s.ok() ? std::move(*s) : nullptr;
}

GenerateRequest Greedy(const Model& m, const std::string& prompt, int n) {
  Tokenizer tok(m);
  GenerateRequest r;
  r.prompt = *tok.Encode(prompt, true, false);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadOrDie(hone::testing::SharedModel("stories260K.gguf"));
    ASSERT_TRUE(model_);
  }
  std::shared_ptr<Model> model_;
};

TEST_F(Stories, GreedyContinuationIsAStory) {
  auto s = NewSession(model_);
  std::string streamed;
  auto r = Generate(*s, Greedy(*model_, "Once upon a time", 64), [&](std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->tokens.size(), 64u);
  // TinyStories vocabulary: a story about someone, told with common words.
  int hits = 0;
  for (const char* w :
       {" there", " was", " little", " girl", " boy", " named", " She", " He", " day", " play"}) {
    hits += r->text.find(w) != std::string::npos;
  }
  EXPECT_GE(hits, 3) << r->text;
  EXPECT_GT(r->gen_tps(), 0);
  EXPECT_GT(r->prompt_seconds, 0);
}

TEST_F(Stories, GreedyIsDeterministicAndSeedReproducible) {
  auto s = NewSession(model_);
  auto a = Generate(*s, Greedy(*model_, "Once upon a time", 32));
  auto b = Generate(*s, Greedy(*model_, "Once upon a time", 32));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, b->text);
  GenerateRequest r = Greedy(*model_, "Once upon a time", 32);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 7;
  auto c = Generate(*s, r);
  auto d = Generate(*s, r);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_EQ(c->text, d->text);
}

TEST_F(Stories, StopStringEndsGeneration) {
  auto s = NewSession(model_);
  auto full = Generate(*s, Greedy(*model_, "Once upon a time", 64));
  ASSERT_TRUE(full.ok());
  // Stop at the first period the model writes.
  size_t dot = full->text.find('.');
  ASSERT_NE(dot, std::string::npos);
  GenerateRequest r = Greedy(*model_, "Once upon a time", 64);
  r.stop = {"."};
  auto cut = Generate(*s, r);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->stop_reason, StopReason::kStopString);
  EXPECT_EQ(cut->text, full->text.substr(0, dot));
}

TEST_F(Stories, CallbackCanCancel) {
  auto s = NewSession(model_);
  int calls = 0;
  auto r =
      Generate(*s, Greedy(*model_, "Once upon a time", 64), [&](std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, StopReason::kCancelled);
  EXPECT_EQ(calls, 3);
}

TEST_F(Stories, PromptLongerThanContextIsAnError) {
  SessionOptions o;
  o.n_ctx = 32;
  auto s = Session::Create(model_, o);
  ASSERT_TRUE(s.ok());
  GenerateRequest r = Greedy(*model_, std::string(400, 'a'), 4);
  auto g = Generate(**s, r);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(Generate(**s, GenerateRequest{}).ok());  // empty prompt
}

TEST_F(Stories, ParallelBatchMatchesSequential) {
  auto single = NewSession(model_);
  std::vector<std::string> prompts = {"Once upon a time", "The cat", "Tom and Lily", "One day"};
  std::vector<GenerateRequest> reqs;
  std::vector<std::string> expected;
  for (auto& p : prompts) {
    reqs.push_back(Greedy(*model_, p, 24));
    auto r = Generate(*single, reqs.back());
    ASSERT_TRUE(r.ok());
    expected.push_back(r->text);
  }
  auto multi = NewSession(model_, 4);
  auto out = GenerateParallel(*multi, reqs);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*out)[i].text, expected[i]) << prompts[i];
    EXPECT_EQ((*out)[i].tokens.size(), 24u);
  }
}

// Decode and prefill on different CPU sets (machines with two kinds of cores):
// each phase gets its own pinned pool, and the answer does not change.
TEST_F(Stories, PrefillOnItsOwnCpusGivesTheSameAnswer) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  ASSERT_FALSE(cpus.empty());
  GenerateRequest req = Greedy(*model_, "Once upon a time there was a little girl named Lily. She", 32);
  auto plain = Generate(*NewSession(model_), req);
  ASSERT_TRUE(plain.ok()) << plain.error().ToString();

  SessionOptions o;
  o.n_ctx = 512;
  o.threads = 1;
  o.threads_batch = static_cast<int>(cpus.size());
  o.cpus = {cpus.back()};  // decode on one CPU
  o.cpus_batch = cpus;     // prefill on every CPU
  auto split = Session::Create(model_, o);
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  auto r = Generate(**split, req);
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);  // this test thread, as it was
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->tokens, plain->tokens);
  // The last step decoded one token: on decode's CPU, not left on prefill's.
  EXPECT_EQ(CPU_COUNT(&after), 1);
  EXPECT_TRUE(CPU_ISSET(cpus.back(), &after));
}

TEST_F(Stories, LogitsAreExposed) {
  auto s = NewSession(model_);
  Tokenizer tok(*model_);
  auto prompt = *tok.Encode("Once upon a time", true, false);
  ASSERT_TRUE(Prefill(*s, 0, prompt, 0).ok());
  const float* logits = s->Logits(-1);
  ASSERT_NE(logits, nullptr);
  int best = 0;
  for (int i = 1; i < s->n_vocab(); ++i) best = logits[i] > logits[best] ? i : best;
  auto g = Generate(*s, Greedy(*model_, "Once upon a time", 1));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->tokens[0], best);  // greedy picks the argmax of the same logits
}

TEST_F(Stories, EmbeddingsArePooledAndNormalised) {
  auto s = NewSession(model_, 1, /*embeddings=*/true);
  auto e = Embed(*s, {"Once upon a time", "Once upon a time", "The dog ran to the park."});
  ASSERT_TRUE(e.ok()) << e.error().ToString();
  ASSERT_EQ(e->vectors.size(), 3u);
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d += a[i] * b[i];
    return d;
  };
  EXPECT_EQ(e->vectors[0].size(), 64u);
  EXPECT_NEAR(dot(e->vectors[0], e->vectors[0]), 1.0, 1e-4);
  EXPECT_NEAR(dot(e->vectors[0], e->vectors[1]), 1.0, 1e-4);  // same text, same vector
  EXPECT_LT(dot(e->vectors[0], e->vectors[2]), 0.9999);
  EXPECT_FALSE(Embed(*s, {""}).ok());
}

TEST(RandomVocab, StreamIsAlwaysValidUtf8) {
  // llama-2-tiny-random emits byte tokens that split and break characters.
  auto model = LoadOrDie(hone::testing::SharedModel("llama-2-tiny-random.gguf"));
  ASSERT_TRUE(model);
  auto s = NewSession(model);
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    GenerateRequest r = Greedy(*model, "你好，世界", 96);
    r.sampling.temperature = 1.5f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0;
    r.sampling.seed = seed;
    r.ignore_eos = true;
    auto g = Generate(*s, r, [](std::string_view t) {
      EXPECT_TRUE(IsValidUtf8(t));
      return true;
    });
    ASSERT_TRUE(g.ok()) << g.error().ToString();
    EXPECT_TRUE(IsValidUtf8(g->text));
  }
}

TEST(Tokenizer, ChineseRoundTripWithQwenTokenizer) {
  auto model = LoadOrDie(hone::testing::TinySynthModel());
  ASSERT_TRUE(model);
  Tokenizer tok(*model);
  std::string text = "满纸荒唐言，一把辛酸泪！Hello, world.";
  auto ids = tok.Encode(text, false, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_LT(ids->size(), text.size());  // BPE merges, not bytes
  EXPECT_EQ(tok.Decode(*ids), text);
  auto chat = tok.ApplyChatTemplate({{"system", "You are helpful."}, {"user", "你好"}}, true);
  ASSERT_TRUE(chat.ok()) << chat.error().ToString();
  EXPECT_NE(chat->find("<|im_start|>user\n你好<|im_end|>"), std::string::npos) << *chat;
  EXPECT_NE(chat->find("<|im_start|>assistant\n"), std::string::npos);
}

// The top-k shortcut (see sampler.h) must pick exactly the tokens llama.cpp's
// full-vocabulary path picks: greedy, and seeded sampling through top-k,
// top-p, min-p and temperature, on a 512-token and a 151,936-token vocabulary.
TEST(Sampler, TopKShortcutPicksTheSameTokensAsTheFullVocabulary) {
  for (const std::string& path :
       {hone::testing::SharedModel("stories260K.gguf"), hone::testing::TinySynthModel()}) {
    auto model = LoadOrDie(path);
    ASSERT_TRUE(model);
    SamplingOptions variants[3];
    variants[0].temperature = 0;
    variants[1].seed = 42;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    variants[2].seed = 7, variants[2].top_k = 5, variants[2].top_p = 0.8f, variants[2].min_p = 0,
    variants[2].temperature = 1.5f;
    for (const SamplingOptions& o : variants) {
      std::vector<std::vector<Token>> outputs;
      for (bool full : {true, false}) {
        auto s = NewSession(model);
        ASSERT_TRUE(s);
        GenerateRequest r = Greedy(*model, "Once upon a time", 48);
        r.sampling = o;
        r.sampling.full_vocab = full;
        r.ignore_eos = true;
        auto g = Generate(*s, r);
        ASSERT_TRUE(g.ok()) << g.error().ToString();
        outputs.push_back(g->tokens);
      }
      EXPECT_EQ(outputs[0].size(), 48u);
      EXPECT_EQ(outputs[0], outputs[1]) << path << " temperature " << o.temperature << " top_k " << o.top_k;
    }
  }
}

}  // namespace
}  // namespace hone::engine
