// End-to-end: the hone binary as a user runs it, on real models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "testing/test_env.h"

namespace hone {
namespace {

using testing::HoneBinary;
using testing::RunCommand;
using testing::SharedModel;
using testing::SourceDir;
using testing::TempPath;

std::string Hone(const std::string& args) { return HoneBinary() + " " + args; }

nlohmann::json JsonOf(const testing::CommandResult& r) {
  auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

TEST(Cli, HelpForEverySubcommand) {
  for (const char* sub : {"", "info", "inspect", "run", "synth"}) {
    auto r = RunCommand(Hone(std::string(sub) + " --help"));
    EXPECT_EQ(r.exit_code, 0) << sub << "\n" << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << sub;
  }
}

TEST(Cli, NoSubcommandIsAnError) {
  auto r = RunCommand(Hone(""));
  EXPECT_NE(r.exit_code, 0);
}

TEST(Cli, InfoJsonHasProbeAndBandwidth) {
  auto r = RunCommand(Hone("info --json --bandwidth-seconds 0.2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_GE(j["physical_cores"].get<int>(), 1);
  EXPECT_GE(j["logical_cpus"].get<int>(), j["physical_cores"].get<int>());
  EXPECT_GT(j["memory"]["total_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["bandwidth"]["read_gbps"].get<double>(), 0.1);
  EXPECT_FALSE(j["fingerprint"].get<std::string>().empty());
}

TEST(Cli, InfoTextMentionsBandwidth) {
  auto r = RunCommand(Hone("info --bandwidth-seconds 0.2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GB/s"), std::string::npos) << r.output;
}

// `hone serve` with nothing named serves ./models (where setup.sh puts its
// models) when it holds any, and says so; an empty one is a clear error.
TEST(Cli, ServeWithoutModelsServesTheModelsFolder) {
  const std::string dir = testing::TempPath("serve-default-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir + "/models");
  auto none = RunCommand("cd " + dir + " && " + HoneBinary() + " serve --port 0 2>&1");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("./models has none"), std::string::npos) << none.output;
  std::filesystem::create_symlink(SharedModel("stories260K.gguf"), dir + "/models/stories260K.gguf");
  // Up for a second, then SIGTERM: it drains and exits.
  auto up = RunCommand("cd " + dir + " && timeout -s TERM 3 " + HoneBinary() + " serve --port 0 2>&1");
  EXPECT_NE(up.output.find("serving the models in ./models"), std::string::npos) << up.output;
  EXPECT_NE(up.output.find("listening on"), std::string::npos) << up.output;
  std::filesystem::remove_all(dir);
}

// Another machine's /proc and /sys (the fixture trees): the kinds of cores,
// fastest first, and the ARM CPU's name from its part numbers.
TEST(Cli, InfoShowsTheKindsOfCoresOfAnotherMachine) {
  const std::string fixtures = SourceDir() + "/tests/fixtures/sysfs/";
  auto arm = RunCommand(Hone("info --no-bandwidth --root " + fixtures + "arm_biglittle"));
  ASSERT_EQ(arm.exit_code, 0) << arm.output;
  EXPECT_NE(arm.output.find("ARM Cortex-A55 + Cortex-A76 (aarch64)"), std::string::npos) << arm.output;
  EXPECT_NE(arm.output.find("Core kinds  big: CPUs 4-7; little: CPUs 0-3"), std::string::npos) << arm.output;
  auto intel = RunCommand(Hone("info --json --no-bandwidth --root " + fixtures + "intel_hybrid_laptop"));
  ASSERT_EQ(intel.exit_code, 0) << intel.output;
  auto j = JsonOf(intel);
  ASSERT_EQ(j["core_kinds"].size(), 2u) << intel.output;
  EXPECT_EQ(j["core_kinds"][0]["name"], "performance");
  EXPECT_EQ(j["core_kinds"][1]["cpus"].size(), 8u);
  EXPECT_EQ(j["core_kinds_source"], "intel hybrid (sysfs)");
  auto missing = RunCommand(Hone("info --no-bandwidth --root " + fixtures + "no_such_machine"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("cpuinfo"), std::string::npos) << missing.output;
}

TEST(Cli, InspectStories) {
  auto r = RunCommand(Hone("inspect " + SharedModel("stories260K.gguf") + " --ctx 512 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["n_params"].get<uint64_t>(), 292800u);
  EXPECT_EQ(j["memory"]["kv_cache"].get<uint64_t>(), 5ull * 512 * 4 * 16 * 2);
  EXPECT_EQ(j["tensor_types"]["f32"]["tensors"].get<int>() > 0, true);
}

TEST(Cli, RunStoriesPrintsStoryAndTimings) {
  auto r =
      RunCommand(Hone("run " + SharedModel("stories260K.gguf") + " -p \"Once upon a time\" -n 64 --temp 0"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Once upon a time", 0), 0u) << r.output;  // prompt echoed first
  EXPECT_NE(r.output.find(" was"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tok/s"), std::string::npos);
  EXPECT_NE(r.output.find("load"), std::string::npos);
  EXPECT_NE(r.output.find("generated 64 tok"), std::string::npos) << r.output;
}

TEST(Cli, RunJsonReportsSpeeds) {
  auto r = RunCommand(
      Hone("run " + SharedModel("stories260K.gguf") + " -p \"Once upon a time\" -n 16 --temp 0 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_EQ(j["generated_tokens"].get<int>(), 16);
  EXPECT_GT(j["gen_tps"].get<double>(), 0);
  EXPECT_GT(j["prompt_tps"].get<double>(), 0);
}

TEST(Cli, RunErrorsAreClear) {
  auto missing = RunCommand(Hone("run /no/such/model.gguf -p hi"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("model file not found"), std::string::npos) << missing.output;

  testing::WriteFile(TempPath("run-junk.gguf"), "junk");
  auto junk = RunCommand(Hone("run " + TempPath("run-junk.gguf") + " -p hi"));
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.output.find("not a GGUF"), std::string::npos) << junk.output;

  auto bad_flag =
      RunCommand(Hone("run " + SharedModel("stories260K.gguf") + " -p hi --flash-attn sometimes"));
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_NE(bad_flag.output.find("flash attention"), std::string::npos) << bad_flag.output;

  auto huge = RunCommand(Hone("run " + SharedModel("stories260K.gguf") + " -p hi -c 1000000000"));
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.output.find("memory"), std::string::npos) << huge.output;
}

TEST(Cli, SynthTinyThenInspectAndRun) {
  std::string model = testing::TinySynthModel();
  ASSERT_TRUE(std::filesystem::exists(model));
  auto r = RunCommand(Hone("inspect " + model + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_EQ(j["architecture"], "qwen2");
  EXPECT_TRUE(j["synthetic"].get<bool>());
  EXPECT_FALSE(j["chat_template"].get<std::string>().empty());
  auto run = RunCommand(Hone("run " + model + " --chat -p \"你好\" -n 8 --temp 0 --ignore-eos"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("generated 8 tok"), std::string::npos) << run.output;
}

TEST(Cli, SynthRejectsUnknownShape) {
  auto r = RunCommand(Hone("synth --like gpt-9 --out " + TempPath("x.gguf")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("qwen2.5-0.5b"), std::string::npos) << r.output;  // lists known shapes
}

TEST(Cli, Qwen05bSynthHasRealShapesAndPeerQuantizeAndBenchLoadIt) {
  std::string f16 = TempPath("qwen2.5-0.5b.f16.gguf");
  std::string q4 = TempPath("qwen2.5-0.5b.Q4_K_M.gguf");
  if (!std::filesystem::exists(f16)) {
    auto s = RunCommand(Hone("synth --like qwen2.5-0.5b --out " + f16));
    ASSERT_EQ(s.exit_code, 0) << s.output;
  }
  auto r = RunCommand(Hone("inspect " + f16 + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = JsonOf(r);
  EXPECT_EQ(j["n_params"].get<uint64_t>(), 494032768u);
  EXPECT_EQ(j["n_embd"].get<int>(), 896);
  EXPECT_EQ(j["n_layer"].get<int>(), 24);
  EXPECT_EQ(j["n_head"].get<int>(), 14);
  EXPECT_EQ(j["n_head_kv"].get<int>(), 2);

  std::string peer = HONE_PEER_BIN_DIR;
  if (!std::filesystem::exists(q4)) {
    auto q = RunCommand(peer + "/llama-quantize " + f16 + " " + q4 + " Q4_K_M");
    ASSERT_EQ(q.exit_code, 0) << q.output;
  }
  auto run = RunCommand(Hone("run " + q4 + " -p \"Hello\" -n 8 --temp 0 --ignore-eos -c 512"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("generated 8 tok"), std::string::npos) << run.output;
  auto bench = RunCommand(peer + "/llama-bench -m " + q4 + " -p 8 -n 4 -r 1 -o json");
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("\"avg_ts\""), std::string::npos) << bench.output;
}

}  // namespace
}  // namespace hone
