// The prompt cache: its bookkeeping on its own (tiers, budgets, scopes, the
// disk format), and the scheduler with it on real trained models: a
// conversation whose slot went to another comes back and restores its
// prefix from RAM or disk, with the same greedy answer as a fresh server.
#include "serve/prompt_cache.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "serve/config.h"
#include "serve/prompt_cache_file.h"
#include "serve/scheduler.h"
#include "testing/test_env.h"

namespace hone::serve {
namespace {

namespace fs = std::filesystem;
using engine::Token;

std::string TempDir(const std::string& name) {
  fs::path d = fs::path(hone::testing::TempDir()) / ("prompt-cache-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::vector<int32_t> Seq(int from, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

PromptCacheOptions Ram(uint64_t bytes) {
  PromptCacheOptions o;
  o.ram_bytes = bytes;
  o.key = "k1";
  o.min_tokens = 4;
  return o;
}

// A cache with a disk tier in `dir`, and RAM of `ram` bytes.
PromptCacheOptions Disk(const std::string& dir, uint64_t ram = 0) {
  PromptCacheOptions o = Ram(ram);
  o.disk_bytes = 1 << 20;
  o.dir = dir;
  return o;
}

// "auto" takes a quarter of free memory, and never more than a quarter of a
// --memory-limit (a small board's budget); an explicit size is taken as given.
TEST(PromptCacheBudget, AutoStaysWithinAQuarterOfTheMemoryLimit) {
  ServeConfig c;
  c.state_dir = hone::testing::TempPath("cache-budget");
  c.cache_ram = "auto";
  c.memory_limit = "1G";
  auto b = ResolvePromptCacheBudget(c);
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  EXPECT_GT(b->ram_bytes, 0u);
  EXPECT_LE(b->ram_bytes, (1ull << 30) / 4);
  EXPECT_EQ(b->dir, c.state_dir + "/prompt-cache");
  c.cache_ram = "64M";
  EXPECT_EQ(ResolvePromptCacheBudget(c)->ram_bytes, 64ull << 20);
  c.cache_ram = "lots";
  EXPECT_FALSE(ResolvePromptCacheBudget(c).ok());
}

TEST(PromptCacheBook, FindsTheLongestPrefixWithinItsScopeOnly) {
  PromptCache c(Ram(1 << 20), nullptr, "m");
  c.Put("a", Seq(0, 40), std::vector<uint8_t>(100, 1));
  c.Put("a", Seq(1000, 40), std::vector<uint8_t>(100, 2));
  auto prompt = Seq(0, 60);
  CacheMatch m = c.Find("a", prompt);
  EXPECT_EQ(m.tier, CacheTier::kRam);
  EXPECT_EQ(m.tokens, 40u);
  EXPECT_EQ(c.Find("b", prompt).tier, CacheTier::kNone);  // another tenant's
  auto state = c.Load(m);
  ASSERT_TRUE(state);
  EXPECT_EQ((*state)[0], 1);
}

TEST(PromptCacheBook, APrefixOfAnEntryIsNotStoredTwice) {
  PromptCache c(Ram(1 << 20), nullptr, "m");
  c.Put("a", Seq(0, 40), std::vector<uint8_t>(100));
  c.Put("a", Seq(0, 80), std::vector<uint8_t>(200));  // extends it: replaces it
  c.Put("a", Seq(0, 20), std::vector<uint8_t>(50));   // covered: skipped
  auto list = c.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].tokens, 80u);
  EXPECT_EQ(c.ram_bytes(), 200u);
  EXPECT_TRUE(c.Covers("a", Seq(0, 50)));
  EXPECT_FALSE(c.Covers("b", Seq(0, 50)));
}

TEST(PromptCacheBook, RamIsLeastRecentlyUsedByBytes) {
  PromptCache c(Ram(250), nullptr, "m");
  c.Put("a", Seq(0, 10), std::vector<uint8_t>(100));
  c.Put("a", Seq(100, 10), std::vector<uint8_t>(100));
  ASSERT_TRUE(c.Load(c.Find("a", Seq(0, 12))));  // the first is used again
  c.Put("a", Seq(200, 10), std::vector<uint8_t>(100));
  EXPECT_LE(c.ram_bytes(), 250u);
  EXPECT_EQ(c.Find("a", Seq(0, 12)).tier, CacheTier::kRam);
  EXPECT_EQ(c.Find("a", Seq(100, 12)).tier, CacheTier::kNone);  // no disk tier: dropped
}

// --cache-ram bounds all models together: the least recently used entry of
// any model leaves RAM first, and an unloaded model's bytes are free again.
TEST(PromptCacheBook, OneRamLimitIsSharedByEveryModelsCache) {
  auto limit = std::make_shared<CacheRamLimit>(250);
  PromptCacheOptions o = Ram(250);
  o.ram_limit = limit;
  PromptCache a(o, nullptr, "a");
  auto b = std::make_unique<PromptCache>(o, nullptr, "b");
  a.Put("t", Seq(0, 10), std::vector<uint8_t>(100));
  b->Put("t", Seq(100, 10), std::vector<uint8_t>(100));
  ASSERT_TRUE(a.Load(a.Find("t", Seq(0, 12))));  // model a's entry is used again
  a.Put("t", Seq(200, 10), std::vector<uint8_t>(100));
  EXPECT_EQ(limit->used(), 200u);
  EXPECT_EQ(b->Find("t", Seq(100, 12)).tier, CacheTier::kNone);  // model b's was the oldest
  EXPECT_EQ(a.Find("t", Seq(0, 12)).tier, CacheTier::kRam);
  EXPECT_EQ(a.Find("t", Seq(200, 12)).tier, CacheTier::kRam);
  b->Put("t", Seq(300, 10), std::vector<uint8_t>(100));  // evicts a's least recently used
  EXPECT_EQ(a.ram_bytes() + b->ram_bytes(), 200u);
  EXPECT_EQ(a.Find("t", Seq(0, 12)).tier, CacheTier::kNone);
  b.reset();  // the model is unloaded: its bytes go back to the others
  EXPECT_EQ(limit->used(), a.ram_bytes());
  a.Put("t", Seq(400, 10), std::vector<uint8_t>(100));
  EXPECT_EQ(a.ram_bytes(), 200u);
  EXPECT_EQ(a.Find("t", Seq(200, 12)).tier, CacheTier::kRam);
}

TEST(PromptCacheBook, DiskEntriesSurviveAndAnotherKeysAreDeleted) {
  const std::string dir = TempDir("keys");
  PromptCacheOptions o = Disk(dir);  // no RAM: straight to disk
  {
    PromptCache c(o, nullptr, "m");
    c.Put("a", Seq(0, 30), std::vector<uint8_t>(300, 7));
    c.Flush();
    EXPECT_EQ(c.disk_bytes(), 300u);
  }
  {
    PromptCache c(o, nullptr, "m");  // a restart
    CacheMatch m = c.Find("a", Seq(0, 31));
    ASSERT_EQ(m.tier, CacheTier::kDisk);
    auto state = c.Load(m);
    ASSERT_TRUE(state);
    EXPECT_EQ(state->size(), 300u);
    EXPECT_EQ((*state)[299], 7);
  }
  o.key = "k2";  // the model file was replaced under the same name
  PromptCache c(o, nullptr, "m");
  EXPECT_TRUE(c.List().empty());
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(PromptCacheBook, ADamagedOrTruncatedFileIsAMissNeverACrash) {
  const std::string dir = TempDir("damage");
  PromptCacheOptions o = Disk(dir);
  {
    PromptCache c(o, nullptr, "m");
    c.Put("a", Seq(0, 30), std::vector<uint8_t>(4000, 3));
    c.Put("a", Seq(500, 30), std::vector<uint8_t>(4000, 4));
    c.Flush();
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 2u);
  // One flipped byte in the state (size intact), one file cut short: the
  // first the Seq(0, 30) entry's (names are random, so by their headers).
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return ReadCacheFileHeader(a)->tokens[0] < ReadCacheFileHeader(b)->tokens[0];
  });
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2000);
    f.put('\x55');
  }
  fs::resize_file(files[1], fs::file_size(files[1]) - 100);
  Metrics metrics;
  PromptCache c(o, &metrics, "m");
  ASSERT_EQ(c.List().size(), 1u);  // the short one is gone at once
  CacheMatch m = c.Find("a", Seq(0, 31));
  ASSERT_EQ(m.tier, CacheTier::kDisk);
  EXPECT_FALSE(c.Load(m));  // checksum
  EXPECT_TRUE(c.List().empty());
  EXPECT_EQ(metrics.Get("hone_prompt_cache_disk_damaged_total", "m"), 1);
}

TEST(PromptCacheBook, AWriteKilledHalfwayLeavesOnlyATmpFileThatTheNextStartDeletes) {
  const std::string dir = TempDir("killed");
  PromptCacheOptions o = Disk(dir);
  {
    PromptCache c(o, nullptr, "m");
    c.Put("a", Seq(0, 30), std::vector<uint8_t>(300, 9));
  }
  // What a kill during WriteCacheFile leaves: a partial file under the temporary name.
  const std::string partial = dir + "/00000000000000ff.kv.tmp";
  hone::testing::WriteFile(partial, "HONEKV");
  hone::testing::WriteFile(dir + "/notes.kv", "someone else's file");  // not ours: left alone
  PromptCache c(o, nullptr, "m");
  EXPECT_TRUE(fs::exists(dir + "/notes.kv"));
  EXPECT_FALSE(fs::exists(partial));
  ASSERT_EQ(c.List().size(), 1u);
  EXPECT_TRUE(c.Load(c.Find("a", Seq(0, 31))));
}

TEST(PromptCacheBook, AFullDiskFailsTheWriteAndTheEntryStaysInRam) {
  const std::string dir = TempDir("full");
  PromptCacheOptions o = Disk(dir, 1 << 20);
  Metrics metrics;
  PromptCache c(o, &metrics, "m");
  // No file may grow past 4 KiB while the entry is written: what a full disk
  // does to write(2) (EFBIG here, ENOSPC there), without filling a disk.
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  c.Put("a", Seq(0, 30), std::vector<uint8_t>(100000, 1));
  c.Flush();
  setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_EQ(metrics.Get("hone_prompt_cache_disk_write_errors_total", "m"), 1);
  EXPECT_EQ(c.disk_bytes(), 0u);
  EXPECT_EQ(c.Find("a", Seq(0, 31)).tier, CacheTier::kRam);
  EXPECT_TRUE(fs::is_empty(dir));  // neither the entry nor its .tmp is left
}

TEST(PromptCacheBook, BytesWaitingForTheDiskAreBounded) {
  const std::string dir = TempDir("queue");
  Metrics metrics;
  PromptCache c(Disk(dir), &metrics, "m");
  // More than may wait for the disk at once (64 MiB here): kept in RAM only,
  // and with no RAM tier, not kept at all, rather than held past the budget.
  c.Put("a", Seq(0, 30), std::vector<uint8_t>((64u << 20) + 1, 1));
  c.Flush();
  EXPECT_EQ(metrics.Get("hone_prompt_cache_disk_writes_skipped_total", "m"), 1);
  EXPECT_EQ(c.ram_bytes(), 0u);
  EXPECT_TRUE(c.List().empty());
}

TEST(PromptCacheBook, AnUnwritableFolderLeavesTheRamTierWorking) {
  PromptCacheOptions o = Ram(1 << 20);
  o.disk_bytes = 1 << 20;
  o.dir = "/proc/hone-cannot-write-here";
  PromptCache c(o, nullptr, "m");
  c.Put("a", Seq(0, 30), std::vector<uint8_t>(100));
  c.Flush();
  EXPECT_EQ(c.Find("a", Seq(0, 31)).tier, CacheTier::kRam);
  EXPECT_EQ(c.disk_bytes(), 0u);
}

// The scheduler with the cache, on the trained models in ../shared.
class PromptCacheServe : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto m = engine::Model::Load(hone::testing::SharedModel(GetParam()));
    ASSERT_TRUE(m.ok()) << m.error().ToString();
    model_ = *m;
  }
  std::unique_ptr<Scheduler> Make(uint64_t ram, uint64_t disk = 0, const std::string& dir = "", int slots = 1,
                                  KvUnified layout = KvUnified::kAuto) {
    SchedulerOptions o{.slots = slots, .ctx_per_slot = 256, .kv_unified = layout};
    o.threads = 1;  // see scheduler_test.cc: two tests share 2 cores
    o.cache.ram_bytes = ram;
    o.cache.disk_bytes = disk;
    o.cache.dir = dir;
    o.cache.key = std::string("test;") + GetParam();
    auto s = Scheduler::Create(model_, o, &metrics_, "m");
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::vector<Token> Tokens(const std::string& text, bool bos) {
    return *engine::Tokenizer(*model_).Encode(text, bos, false);
  }
  // A conversation's first turn, and its return: the first prompt, the
  // answer's tokens, then a new question.
  std::vector<Token> FirstTurn() {
    return Tokens(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
        "with her big red ball. One day, she saw a small bird sitting on a tree.",
        true);
  }
  std::vector<Token> Returning(const std::vector<Token>& first, const std::vector<Token>& answer) {
    std::vector<Token> p = first;
    p.insert(p.end(), answer.begin(), answer.end());
    auto more = Tokens(" Then her mom called her home for dinner.", false);
    p.insert(p.end(), more.begin(), more.end());
    return p;
  }
  static std::shared_ptr<Job> NewJob(std::vector<Token> prompt, int max_tokens, std::string scope = "") {
    engine::SamplingOptions s;
    s.temperature = 0;
    return std::make_shared<Job>(std::move(prompt), max_tokens, s, std::vector<std::string>{},
                                 Clock::now() + std::chrono::seconds(60), std::vector<Token>{},
                                 std::move(scope));
  }
  // Runs a job to the end; its text and result.
  static std::pair<std::string, JobResult> Run(Scheduler& s, std::shared_ptr<Job> j) {
    EXPECT_EQ(*s.Submit(j), SubmitResult::kOk);
    std::string text = j->WaitAll();
    return {text, j->result()};
  }
  // First turn, then another conversation takes the only slot: the first
  // one's KV survives only in the prompt cache. Returns the answer's tokens
  // as the returning prompt needs them (the first turn's text, tokenized).
  std::vector<Token> FirstTurnThenEvict(Scheduler& s, const std::string& scope) {
    auto [text, r] = Run(s, NewJob(FirstTurn(), 12, scope));
    EXPECT_EQ(r.finish, Finish::kLength);
    Run(s,
        NewJob(Tokens("The sun was hot and the dog was sleeping under a big green tree all day long.", true),
               4, scope));
    return Tokens(text, false);
  }

  std::shared_ptr<engine::Model> model_;
  Metrics metrics_;
};

TEST_P(PromptCacheServe, AReturningTurnRestoresItsPrefixAndAnswersAsAFreshServer) {
  auto fresh = Make(0);  // no prompt cache: the whole history is prefilled
  std::vector<Token> answer;
  {
    auto [text, r] = Run(*fresh, NewJob(FirstTurn(), 12));
    answer = Tokens(text, false);
  }
  const auto again = Returning(FirstTurn(), answer);
  fresh.reset();
  fresh = Make(0);
  auto [expected, fresh_r] = Run(*fresh, NewJob(again, 24));
  EXPECT_EQ(fresh_r.cached_tokens, 0);

  auto s = Make(64 << 20);
  ASSERT_EQ(FirstTurnThenEvict(*s, ""), answer);
  auto [text, r] = Run(*s, NewJob(again, 24));
  EXPECT_EQ(text, expected);  // token-identical greedy answer
  EXPECT_GE(r.cached_tokens, static_cast<int>(FirstTurn().size()));
  EXPECT_EQ(metrics_.Get("hone_prompt_cache_ram_hits_total", "m"), 1);
}

// One KV stream for both slots (--kv-unified on): the other slot's cells sit
// among the free ones, and the restored state lands in whatever cells are
// free; the answer is still the fresh server's.
TEST_P(PromptCacheServe, ARestoreIntoASharedStreamBesideAnotherSlotAnswersTheSame) {
  auto fresh = Make(0);
  std::vector<Token> answer;
  {
    auto [text, r] = Run(*fresh, NewJob(FirstTurn(), 12));
    answer = Tokens(text, false);
  }
  const auto again = Returning(FirstTurn(), answer);
  fresh.reset();
  fresh = Make(0);
  auto [expected, fresh_r] = Run(*fresh, NewJob(again, 24));

  auto s = Make(64 << 20, 0, "", 2, KvUnified::kOn);
  Run(*s, NewJob(FirstTurn(), 12));  // slot A
  Run(*s,
      NewJob(Tokens("The sun was hot and the dog was sleeping under a big green tree.", true), 8));  // slot B
  // The least recently used slot (A) is taken: the first conversation goes to the cache.
  Run(*s, NewJob(Tokens("Tom had a toy car. The toy car was red and fast and shiny.", true), 8));
  auto [text, r] = Run(*s, NewJob(again, 24));  // restored into B's place, beside A's cells
  EXPECT_EQ(text, expected);
  EXPECT_GE(r.cached_tokens, static_cast<int>(FirstTurn().size()));
  EXPECT_EQ(metrics_.Get("hone_prompt_cache_ram_hits_total", "m"), 1);
}

TEST_P(PromptCacheServe, ATenantNeverRestoresAnotherTenantsPrefix) {
  auto s = Make(64 << 20);
  const auto answer = FirstTurnThenEvict(*s, "key-aaaa");
  auto [text, r] = Run(*s, NewJob(Returning(FirstTurn(), answer), 4, "key-bbbb"));
  EXPECT_EQ(r.cached_tokens, 0);
  // Nor from a slot: tenant B's prompt now sits in the only slot.
  auto [text2, r2] = Run(*s, NewJob(Returning(FirstTurn(), answer), 4, "key-cccc"));
  EXPECT_EQ(r2.cached_tokens, 0);
  // The owner still finds it.
  auto [text3, r3] = Run(*s, NewJob(Returning(FirstTurn(), answer), 4, "key-aaaa"));
  EXPECT_GE(r3.cached_tokens, static_cast<int>(FirstTurn().size()));
}

TEST_P(PromptCacheServe, AfterARestartTheDiskTierRestoresAndAnswersTheSame) {
  const std::string dir = TempDir(std::string("restart-") + GetParam());
  std::vector<Token> answer;
  std::string expected;
  {
    auto s = Make(64 << 20, 64 << 20, dir);
    answer = FirstTurnThenEvict(*s, "t");
    expected = Run(*s, NewJob(Returning(FirstTurn(), answer), 16, "t")).first;  // from RAM
  }  // unloading saves the slot and writes what is queued
  auto s = Make(64 << 20, 64 << 20, dir);
  auto [text, r] = Run(*s, NewJob(Returning(FirstTurn(), answer), 16, "t"));
  EXPECT_EQ(text, expected);
  EXPECT_GE(r.cached_tokens, static_cast<int>(FirstTurn().size()));
  EXPECT_EQ(metrics_.Get("hone_prompt_cache_disk_hits_total", "m"), 1);
}

TEST_P(PromptCacheServe, DamagedFilesAreMissesWithTheSameAnswer) {
  const std::string dir = TempDir(std::string("damaged-") + GetParam());
  std::vector<Token> answer;
  std::string expected;
  {
    auto s = Make(64 << 20, 64 << 20, dir);
    answer = FirstTurnThenEvict(*s, "t");
    expected = Run(*s, NewJob(Returning(FirstTurn(), answer), 16, "t")).first;
  }
  for (const auto& e : fs::directory_iterator(dir)) {  // flip a byte in every entry's state
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(e.path()) - 64));
    f.put('\x5a');
  }
  auto s = Make(64 << 20, 64 << 20, dir);
  auto [text, r] = Run(*s, NewJob(Returning(FirstTurn(), answer), 16, "t"));
  EXPECT_EQ(text, expected);
  EXPECT_EQ(r.cached_tokens, 0);
  EXPECT_GE(metrics_.Get("hone_prompt_cache_disk_damaged_total", "m"), 1);
}

// A declared shared prefix (a route's system prompt) is warmed, reused by
// every scope from a slot or the cache, and answers as a fresh server; past
// it, another scope's tokens stay its own.
TEST_P(PromptCacheServe, ASharedPrefixIsReusedAcrossScopesAndAnswersAsAFreshServer) {
  const std::vector<Token> shared = FirstTurn();
  auto with = [&](const std::string& text) {
    std::vector<Token> p = shared;
    auto more = Tokens(text, false);
    p.insert(p.end(), more.begin(), more.end());
    return p;
  };
  const auto a_prompt = with(" Lily ran to the bird and said hello to it with a big smile on her face.");
  const auto b_prompt = with(" The bird flew away.");
  auto fresh = Make(0);
  const auto [expected, fr] = Run(*fresh, NewJob(b_prompt, 12, "b"));
  EXPECT_EQ(fr.cached_tokens, 0);

  auto s = Make(64u << 20);
  s->ShareSystemPrefix(shared);  // warmed before the jobs below (one slot, in order)
  auto [a_text, a] = Run(*s, NewJob(a_prompt, 4, "a"));
  EXPECT_EQ(a.cached_tokens, static_cast<int>(shared.size())) << "the warmed prefix, from the slot";
  // Another conversation takes the slot: the shared prefix is in the cache only.
  Run(*s,
      NewJob(Tokens("The sun was hot and the dog was sleeping under a big green tree all day long.", true), 4,
             "c"));
  auto [b_text, b] = Run(*s, NewJob(b_prompt, 12, "b"));
  EXPECT_EQ(b.cached_tokens, static_cast<int>(shared.size())) << "restored from the cache's shared entry";
  EXPECT_EQ(b_text, expected);
  EXPECT_GE(metrics_.Get("hone_prompt_cache_ram_hits_total", "m"), 1);
  // Scope b asks with a's conversation: it gets the shared part, not a's own tokens.
  const auto b_asks_a =
      with(" Lily ran to the bird and said hello to it with a big smile on her face. More.");
  auto [_, b_as_a] = Run(*s, NewJob(b_asks_a, 2, "b"));
  EXPECT_GE(b_as_a.cached_tokens, static_cast<int>(shared.size()));
  EXPECT_LE(b_as_a.cached_tokens, static_cast<int>(CommonPrefix(b_asks_a, b_prompt)))
      << "none of a's own tokens";
}

INSTANTIATE_TEST_SUITE_P(SharedModels, PromptCacheServe,
                         ::testing::Values("stories260K.gguf", "tinystories-d256-l4-f32.gguf",
                                           "llama-2-tiny-random.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find_first_of("-.")) + std::to_string(info.index);
                         });

}  // namespace
}  // namespace hone::serve
