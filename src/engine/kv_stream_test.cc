// One KV stream for all sequences (SessionOptions::kv_unified) against one
// stream each: how many forward passes a mixed step takes, and that the
// tokens come out the same either way.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/batch_decoder.h"
#include "engine/session.h"
#include "engine/tokenizer.h"
#include "ggml.h"
#include "testing/test_env.h"

namespace hone::engine {
namespace {

// Counts graph evaluations: the first layer's attention norm is computed
// once per forward pass (ubatch), whatever the batch holds.
struct PassCounter {
  int passes = 0;
  static bool Callback(ggml_tensor* t, bool ask, void* user) {
    const bool wanted = std::strcmp(t->name, "attn_norm-0") == 0;
    if (!ask && wanted) ++static_cast<PassCounter*>(user)->passes;
    return wanted;
  }
};

std::unique_ptr<Session> FourSlots(std::shared_ptr<Model> m, bool unified, PassCounter* counter) {
  SessionOptions o;
  o.n_ctx = 4 * 256;
  o.n_seq_max = 4;
  o.kv_unified = unified;
  o.eval_callback = &PassCounter::Callback;
  o.eval_callback_data = counter;
  auto s = Session::Create(std::move(m), o);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().ToString());
  return s.ok() ? std::move(*s) : nullptr;
}

int Argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

struct MixedStep {
  int passes = 0;         // forward passes of the mixed step alone
  std::vector<int> next;  // greedy next token of each output
};

// Prefills sequences 0 and 2 (a gap in the ids, as when slot 1 is idle),
// then runs one step: four tokens of sequence 0 (a slot checking three
// drafts) beside one token of sequence 2.
MixedStep RunMixedStep(std::shared_ptr<Model> model, bool unified) {
  PassCounter counter;
  auto s = FourSlots(model, unified, &counter);
  MixedStep out;
  if (!s) return out;
  Tokenizer tok(*model);
  auto a = *tok.Encode("Once upon a time there was a little dog", true, false);
  auto b = *tok.Encode("Tom and Lily went to the park", true, false);
  BatchDecoder batch(*s, 64);
  for (size_t i = 0; i < a.size(); ++i) batch.Add(0, a[i], static_cast<int>(i), false);
  for (size_t i = 0; i < b.size(); ++i) batch.Add(2, b[i], static_cast<int>(i), false);
  EXPECT_TRUE(batch.Decode().ok());
  const std::vector<Token> drafts = {
      tok.Encode(" named", false, false)->front(), tok.Encode(" Max", false, false)->front(),
      tok.Encode(".", false, false)->front(), tok.Encode(" He", false, false)->front()};
  counter.passes = 0;
  for (size_t i = 0; i < drafts.size(); ++i) batch.Add(0, drafts[i], static_cast<int>(a.size() + i), true);
  batch.Add(2, tok.Encode(".", false, false)->front(), static_cast<int>(b.size()), true);
  EXPECT_TRUE(batch.Decode().ok());
  out.passes = counter.passes;
  for (int i = 0; i < 5; ++i) out.next.push_back(Argmax(s->Logits(i), s->n_vocab()));
  return out;
}

TEST(KvStreams, AMixedStepIsOnePassInOneSharedStream) {
  auto model = Model::Load(hone::testing::SharedModel("stories260K.gguf"));
  ASSERT_TRUE(model.ok()) << model.error().ToString();
  MixedStep split = RunMixedStep(*model, false);
  MixedStep unified = RunMixedStep(*model, true);
  // Separate streams: llama.cpp's split_equal puts the same number of tokens
  // of each sequence in a ubatch, so 4 + 1 tokens need at least two passes.
  EXPECT_GE(split.passes, 2);
  EXPECT_EQ(unified.passes, 1);
  // The layout changes where cells sit, not what attends to what.
  ASSERT_EQ(split.next.size(), 5u);
  EXPECT_EQ(split.next, unified.next);
}

}  // namespace
}  // namespace hone::engine
