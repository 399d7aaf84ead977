#include "tune/profile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hw/probe.h"
#include "testing/test_env.h"

namespace hone::tune {
namespace {

Profile Sample() {
  Profile p;
  p.fingerprint = "0123456789abcdef";
  p.model_hash = "fedcba9876543210";
  p.model_path = "/models/m.gguf";
  p.workload = "server";
  p.created = "2026-11-29T20:00:00Z";
  p.prompt_tokens = 128;
  p.gen_tokens = 64;
  p.concurrency = 4;
  p.config = DefaultConfig(8, 4);
  p.config.threads = 6;
  p.config.threads_batch = 8;
  p.config.placement = "node0";
  p.config.cpus = {0, 2, 4, 6};
  p.config.strict_cpu = true;
  p.config.poll = 0;
  p.config.n_ubatch = 256;
  p.config.flash_attn = engine::FlashAttn::kOff;
  p.config.kv_type = "q8_0";
  p.config.load_mode = engine::LoadMode::kNoMmap;
  p.config.repack = false;
  p.speedup = 1.234;
  p.speedup_ci95 = 0.02;
  p.llama_server_flags = "-t 6 -tb 8";
  return p;
}

TEST(Profile, RoundTripsThroughToml) {
  Profile p = Sample();
  auto back = ProfileFromToml(ProfileToToml(p));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->config.Key(), p.config.Key());
  EXPECT_EQ(back->config.cpus, p.config.cpus);
  EXPECT_TRUE(back->config.cpus_batch.empty()) << "no own prefill set: the same as decode's";
  EXPECT_EQ(back->config.n_parallel, 4);
  // Decode on the fast cores, prefill on both kinds: the prefill set comes back too.
  p.config.placement_batch = "both";
  p.config.cpus_batch = {0, 2, 4, 6, 8, 9};
  auto split = ProfileFromToml(ProfileToToml(p));
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  EXPECT_EQ(split->config.Key(), p.config.Key());
  EXPECT_EQ(split->config.cpus_batch, p.config.cpus_batch);
  engine::SessionOptions so;
  ApplyProfile(*split, &so, nullptr);
  EXPECT_EQ(so.cpus_batch, p.config.cpus_batch);
  EXPECT_EQ(back->fingerprint, p.fingerprint);
  EXPECT_EQ(back->model_hash, p.model_hash);
  EXPECT_EQ(back->workload, "server");
  EXPECT_DOUBLE_EQ(back->speedup, 1.234);
  EXPECT_EQ(back->llama_server_flags, "-t 6 -tb 8");
}

TEST(Profile, RejectsBrokenOrIncompleteFiles) {
  auto junk = ProfileFromToml("this is = = not toml");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().code, ErrorCode::kCorrupt);
  std::string text = ProfileToToml(Sample());
  std::string no_threads = text;
  no_threads.erase(no_threads.find("threads = 6"), std::string("threads = 6").size());
  EXPECT_FALSE(ProfileFromToml(no_threads).ok());
  std::string bad_fa = text;
  bad_fa.replace(bad_fa.find("flash_attn = 'off'"), std::string("flash_attn = 'off'").size(),
                 "flash_attn = 'x'");
  EXPECT_FALSE(ProfileFromToml(bad_fa).ok());
}

TEST(Profile, ApplySetsRunParametersButNotTheContext) {
  engine::SessionOptions s;
  s.n_ctx = 1234;
  engine::LoadOptions l;
  ApplyProfile(Sample(), &s, &l);
  EXPECT_EQ(s.n_ctx, 1234u);
  EXPECT_EQ(s.threads, 6);
  EXPECT_EQ(s.threads_batch, 8);
  EXPECT_EQ(s.cpus, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_TRUE(s.strict_cpu);
  EXPECT_EQ(s.n_ubatch, 256u);
  EXPECT_EQ(s.kv_type_v, "q8_0");
  EXPECT_EQ(l.mode, engine::LoadMode::kNoMmap);
  EXPECT_FALSE(l.repack);
}

TEST(Profile, ModelHashIsStableAndSeesChanges) {
  std::string a = testing::TempPath("hash-a.bin");
  std::string data(3 << 20, 'x');
  testing::WriteFile(a, data);
  auto h1 = ModelHash(a), h2 = ModelHash(a);
  ASSERT_TRUE(h1.ok());
  EXPECT_EQ(*h1, *h2);
  EXPECT_EQ(h1->size(), 16u);
  data[10] = 'y';  // the header region
  testing::WriteFile(a, data);
  EXPECT_NE(*ModelHash(a), *h1);
  data += "z";  // the size
  testing::WriteFile(a, data);
  EXPECT_NE(*ModelHash(a), *h1);
  EXPECT_EQ(ModelHash(a + ".missing").error().code, ErrorCode::kNotFound);
}

TEST(Profile, FingerprintIsStableAndHardwareSpecific) {
  hw::ProbeOptions po;
  po.measure_bandwidth = false;
  auto m = hw::Probe(po);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(hw::Fingerprint(*m), hw::Fingerprint(*hw::Probe(po)));
  hw::MachineInfo other = *m;
  other.physical_cores += 1;
  EXPECT_NE(hw::Fingerprint(other), hw::Fingerprint(*m));
  other = *m;
  other.mem_available_bytes /= 2;  // free memory changes all the time: not part of the key
  EXPECT_EQ(hw::Fingerprint(other), hw::Fingerprint(*m));
}

TEST(Profile, FindsTheProfileForThisMachineAndModel) {
  std::string dir = testing::TempPath("profiles-find");
  std::filesystem::remove_all(dir);
  setenv("HONE_PROFILE_DIR", dir.c_str(), 1);
  std::string model = testing::TempPath("find-model.bin");
  testing::WriteFile(model, std::string(100000, 'm'));
  auto none = FindProfile(model);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  hw::ProbeOptions po;
  po.measure_bandwidth = false;
  Profile p = Sample();
  p.fingerprint = hw::Fingerprint(*hw::Probe(po));
  p.model_hash = *ModelHash(model);
  std::string path = ProfilePath(p.fingerprint, p.model_hash);
  EXPECT_EQ(path.rfind(dir, 0), 0u);
  ASSERT_TRUE(SaveProfile(p, path).ok());
  auto found = FindProfile(model);
  ASSERT_TRUE(found.ok()) << found.error().ToString();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->path, path);
  EXPECT_EQ((*found)->config.threads, 6);

  testing::WriteFile(path, "[profile]\nversion = 'x'\n");  // damaged: reported, not ignored
  EXPECT_FALSE(FindProfile(model).ok());
  unsetenv("HONE_PROFILE_DIR");
}

}  // namespace
}  // namespace hone::tune
