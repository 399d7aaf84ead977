// Speculative decoding in engine::Generate (`hone run --spec`): for every
// drafter the greedy output is the output without it, token for token, on
// the trained TinyStories model; a seeded sample too; the draft model drafts
// for several sequences in one batch as it does for one; a draft model with
// another vocabulary is refused with the reason.
#include "engine/drafter.h"

#include <gtest/gtest.h>

#include "engine/generator.h"
#include "testing/test_env.h"

namespace hone::engine {
namespace {

// Copy-heavy: the answer restates what the prompt holds, so drafts can be right.
const char* kPrompts[] = {
    "Lily said, \"I like the big red ball.\" Max said, \"I like the big red ball.\" Tom said,",
    "The sun was hot. The cat sat in the shade of the tree. The dog sat in the shade of the tree. The bird",
};

class Speculation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = *Model::Load(hone::testing::SharedModel("tinystories-d256-l4-f32.gguf"));
    draft_ = *Model::Load(hone::testing::SharedModel("stories260K.gguf"));
  }
  static void TearDownTestSuite() { target_.reset(), draft_.reset(); }

  static std::unique_ptr<Session> NewSession(std::shared_ptr<Model> m, uint32_t n_seq = 1,
                                             FlashAttn fa = FlashAttn::kAuto) {
    SessionOptions o;
    o.flash_attn = fa;
    o.n_ctx = 1024 * n_seq;
    o.n_seq_max = n_seq;
    auto s = Session::Create(std::move(m), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().ToString());
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Drafter> NewDrafter(const std::string& mode, const Session& target, int n_seq = 1) {
    DrafterOptions d;
    d.mode = mode;
    d.n_seq = n_seq;
    d.ngram = 3;
    d.target = &target;
    if (mode.find("draft-simple") != std::string::npos) d.draft_session = NewSession(draft_, n_seq);
    auto r = Drafter::Create(std::move(d));
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().ToString());
    return r.ok() ? std::move(*r) : nullptr;
  }
  static GenerateRequest Request(const std::string& prompt, float temperature = 0, uint32_t seed = 0) {
    GenerateRequest r;
    r.prompt = *Tokenizer(*target_).Encode(prompt, true, false);
    r.max_tokens = 160;
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    return r;
  }
  static inline std::shared_ptr<Model> target_, draft_;
};

// Token identity needs a verification batch's logits computed as single
// steps compute them: flash attention's row-by-row kernel does, for batches
// under 64 rows (its tiled kernel takes 64 and more). hone's default, plain
// attention, adds a batch's products in another order: greedy text can then
// part at a near tie (docs/serve.md), which depends on the CPU's kernels, so
// no test pins it.
TEST_F(Speculation, GreedyOutputIsTheSameTokensForEveryMode) {
  auto session = NewSession(target_, 1, FlashAttn::kOn);
  for (const char* prompt : kPrompts) {
    auto plain = Generate(*session, Request(prompt));
    ASSERT_TRUE(plain.ok()) << plain.error().ToString();
    for (const std::string mode : {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod",
                                   "draft-simple", "ngram-simple,draft-simple"}) {
      auto drafter = NewDrafter(mode, *session);
      ASSERT_TRUE(drafter);
      GenerateRequest r = Request(prompt);
      r.drafter = drafter.get();
      r.spec_max = 48;
      auto spec = Generate(*session, r);
      ASSERT_TRUE(spec.ok()) << spec.error().ToString();
      EXPECT_EQ(spec->tokens, plain->tokens) << mode << ": " << prompt;
      EXPECT_LE(spec->accepted_tokens, spec->draft_tokens) << mode;
      if (mode == "ngram-simple" || mode == "draft-simple")
        EXPECT_GT(spec->accepted_tokens, 0) << mode << " kept no draft on a copy-heavy prompt";
    }
  }
}

TEST_F(Speculation, SeededSampleIsTheSameTextWithADraftModel) {
  auto session = NewSession(target_, 1, FlashAttn::kOn);  // row-by-row attention, as above
  for (uint32_t seed : {1u, 42u}) {
    auto plain = Generate(*session, Request(kPrompts[0], 0.8f, seed));
    auto drafter = NewDrafter("draft-simple", *session);
    GenerateRequest r = Request(kPrompts[0], 0.8f, seed);
    r.drafter = drafter.get();
    r.spec_max = 48;
    auto spec = Generate(*session, r);
    ASSERT_TRUE(plain.ok() && spec.ok());
    EXPECT_EQ(spec->text, plain->text) << "seed " << seed;
    EXPECT_GT(spec->draft_tokens, 0);
  }
}

TEST_F(Speculation, BatchedDraftsEqualDraftsMadeOneSequenceAtATime) {
  auto target = NewSession(target_, 2);
  auto batched = NewDrafter("draft-simple", *target, 2);
  auto alone = NewDrafter("draft-simple", *target, 2);
  Tokenizer tok(*target_);
  std::vector<Token> h0 = *tok.Encode(kPrompts[0], true, false), h1 = *tok.Encode(kPrompts[1], true, false);
  const Token last0 = h0.back(), last1 = h1.back();
  h0.pop_back(), h1.pop_back();
  batched->Ask(0, h0, last0, 6);
  batched->Ask(1, h1, last1, 6);
  batched->DraftAsked();
  const auto d0 = batched->Take(0), d1 = batched->Take(1);
  EXPECT_EQ(d0.size(), 6u);
  EXPECT_EQ(d0, alone->Draft(0, h0, last0, 6));
  EXPECT_EQ(d1, alone->Draft(1, h1, last1, 6));
  // The next step: the history grew by last and two kept drafts; the draft
  // model keeps what it decoded of them and drafts on as a fresh one would.
  h0.push_back(last0), h0.push_back(d0[0]), h0.push_back(d0[1]);
  auto fresh = NewDrafter("draft-simple", *target, 2);
  EXPECT_EQ(batched->Draft(0, h0, d0[2], 4), fresh->Draft(0, h0, d0[2], 4));
}

TEST_F(Speculation, ADraftModelWithAnotherVocabularyIsRefused) {
  auto other = *Model::Load(hone::testing::SharedModel("llama-2-tiny-random.gguf"));
  EXPECT_EQ(VocabularyMismatch(*target_, *draft_), "");
  EXPECT_EQ(VocabularyMismatch(*target_, *other), "the vocabularies have 512 and 32000 tokens");
  auto target = NewSession(target_);
  DrafterOptions d;
  d.mode = "draft-simple";
  d.target = target.get();
  d.draft_session = NewSession(other);
  auto r = Drafter::Create(std::move(d));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot draft for"), std::string::npos) << r.error().message;
}

TEST_F(Speculation, ModesAreCheckedWithTheirReasons) {
  EXPECT_TRUE(Drafter::CheckMode("auto", false));
  EXPECT_TRUE(Drafter::CheckMode("ngram-mod", false));
  auto no_model = Drafter::CheckMode("draft-simple", false);
  ASSERT_FALSE(no_model);
  EXPECT_NE(no_model.error().message.find("--draft MODEL"), std::string::npos);
  auto unknown = Drafter::CheckMode("ngram-magic", false);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown speculation mode 'ngram-magic'"), std::string::npos);
}

}  // namespace
}  // namespace hone::engine
