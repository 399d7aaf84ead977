// The tests that would have caught the AMX crash (issue 8), on whatever CPU
// runs them: prefill of a real prompt batch and decode on K-quant, Q8_0 and
// Q4_0 weights with the default load options (repacking, AMX where there is
// AMX); `hone info` saying whether AMX is in use and why; the build being
// keyed on its ISA. (A kernel path that crashes costing the tuner one trial,
// not the process: tests/integration/tune_isolation_test.cc, with the tunes.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/test_env.h"

namespace hone::testing {
namespace {

nlohmann::json JsonOf(const CommandResult& r) {
  size_t start = r.output.find("{\n");
  if (start == std::string::npos) start = r.output.find('{');
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(r.output.substr(start), nullptr, false);
}

bool CpuInfoHas(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" " + flag + " ") != std::string::npos;
  }
  return false;
}

// d256 (n_embd 256, every matrix takes a real K-quant) quantized once per test process.
std::string Quantized(const std::string& type) {
  static const std::string dir = TempPath("isa-lab-" + std::to_string(getpid()));
  const std::string src = SharedModel("tinystories-d256-l4-f32.gguf");
  auto r = RunCommand(HoneBinary() + " quantize " + src + " --types " + type + " --out-dir " + dir +
                      " --json -q 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  if (!j.is_object() || j["outputs"].empty()) return "";
  return j["outputs"][0]["path"].get<std::string>();
}

std::string LongPrompt() {
  std::string p;
  for (int i = 0; i < 24; ++i) p += "Once upon a time there was a little girl. ";
  return p;
}

class DefaultLoadPath : public ::testing::TestWithParam<const char*> {};

TEST_P(DefaultLoadPath, PrefillsAPromptBatchAndDecodes) {
  const std::string model = Quantized(GetParam());
  ASSERT_FALSE(model.empty());
  // Default load options: repacking on, and AMX on machines that have it.
  auto r = RunCommand(HoneBinary() + " run " + model + " -p \"" + LongPrompt() +
                      "\" -n 24 --temp 0 --ignore-eos --no-profile --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << "exit " << r.exit_code << "\n" << r.output;
  auto j = JsonOf(r);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_GE(j["prompt_tokens"].get<int>(), 64);  // a real prompt batch, not one token
  EXPECT_EQ(j["generated_tokens"].get<int>(), 24);
  EXPECT_TRUE(j["repack"].get<bool>());
  EXPECT_GT(j["prompt_tps"].get<double>(), 0);
  EXPECT_GT(j["gen_tps"].get<double>(), 0);
  // Where hone says AMX is in use, these weights really went to its kernels.
  auto info = JsonOf(RunCommand(HoneBinary() + " info --json --no-bandwidth"));
  ASSERT_TRUE(info.is_object());
  EXPECT_EQ(j["amx_weights"].get<bool>(), info["amx"]["in_use"].get<bool>()) << r.output;
  // The trained model still tells a story through those kernels.
  auto story = RunCommand(HoneBinary() + " run " + model +
                          " -p \"Once upon a time\" -n 32 --temp 0 --no-profile 2>/dev/null");
  ASSERT_EQ(story.exit_code, 0) << story.output;
  EXPECT_NE(story.output.find(" was "), std::string::npos) << story.output;
}

INSTANTIATE_TEST_SUITE_P(Types, DefaultLoadPath, ::testing::Values("q4_k_m", "q8_0", "q4_0"));

TEST(Amx, InfoSaysWhetherItIsInUseAndWhy) {
  auto r = RunCommand(HoneBinary() + " info --json --no-bandwidth");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  const auto& amx = j["amx"];
  ASSERT_TRUE(amx.is_object()) << r.output;
  const bool cpu = CpuInfoHas("amx_tile") && CpuInfoHas("amx_int8");
  EXPECT_EQ(amx["cpu"].get<bool>(), cpu);
  EXPECT_FALSE(amx["reason"].get<std::string>().empty());
  if (!cpu) {
    EXPECT_FALSE(amx["in_use"].get<bool>());
#if defined(__x86_64__)
    EXPECT_NE(amx["reason"].get<std::string>().find("no AMX"), std::string::npos) << amx.dump();
#else
    EXPECT_NE(amx["reason"].get<std::string>().find("not applicable"), std::string::npos) << amx.dump();
#endif
    EXPECT_EQ(amx["self_test"], "not run");
  }
  if (amx["in_use"].get<bool>()) {
    EXPECT_EQ(amx["self_test"], "passed");
  }
  // hone's llama.cpp build carries the switch that lets AMX be left out of a load.
  EXPECT_TRUE(amx["switchable"].get<bool>()) << amx.dump();
  auto text = RunCommand(HoneBinary() + " info --no-bandwidth");
  EXPECT_NE(text.output.find("AMX "), std::string::npos) << text.output;
}

TEST(Amx, OffWhenTheUserSaysSo) {
  auto r = RunCommand("HONE_AMX=off " + HoneBinary() + " info --json --no-bandwidth");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_FALSE(j["amx"]["in_use"].get<bool>());
  EXPECT_TRUE(j["amx"]["disabled_by_user"].get<bool>());
}

TEST(Build, TheLlamaCacheIsKeyedOnTheIsaItWasBuiltFor) {
  auto j = JsonOf(RunCommand(HoneBinary() + " info --json --no-bandwidth"));
  ASSERT_TRUE(j.is_object());
  const std::string key = j["llama_cpp"]["build"].get<std::string>();
  const std::string isa = j["llama_cpp"]["build_isa"].get<std::string>();
  ASSERT_FALSE(key.empty());
  // native-<march>-<hash>, portable-x86-64-v3-<hash>, or target-<march>-<hash>
  // (HONE_LLAMA_MARCH: built here for another CPU).
  EXPECT_TRUE(key.rfind("native-", 0) == 0 || key.rfind("portable-", 0) == 0 || key.rfind("target-", 0) == 0)
      << key;
#if defined(__x86_64__)
  EXPECT_NE(isa.find("__SSE2__"), std::string::npos) << isa;
#elif defined(__aarch64__)
  EXPECT_NE(isa.find("__ARM_NEON"), std::string::npos) << isa;
#endif
  // The peers hone links against live in the prefix of that key.
  EXPECT_NE(std::string(HONE_PEER_BIN_DIR).find("prefix-" + key), std::string::npos) << HONE_PEER_BIN_DIR;
  // An AVX-512 build says so in its key's ISA, and only where the CPU has it.
  if (!CpuInfoHas("avx512f")) {
    EXPECT_EQ(isa.find("__AVX512F__"), std::string::npos) << isa;
  }
}

}  // namespace
}  // namespace hone::testing
