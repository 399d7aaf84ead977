// End to end: a real short tune on a small model through the hone binary,
// the profile it writes, and `hone run` picking that profile up.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "testing/test_env.h"

namespace hone::testing {
namespace {

std::string ProfileEnv(const std::string& dir) { return "HONE_PROFILE_DIR=" + dir + " "; }

std::string FreshDir(const std::string& name) {
  std::string dir = TempPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json JsonOf(const std::string& output) {
  size_t start = output.find("{\n");
  if (start == std::string::npos) return {};
  return nlohmann::json::parse(output.substr(start), nullptr, false);
}

TEST(TuneCli, ShortTuneWritesAProfileThatRunPicksUp) {
  std::string model = SharedModel("stories260K.gguf");
  std::string dir = FreshDir("profiles-e2e");
  auto r = RunCommand(ProfileEnv(dir) + HoneBinary() + " tune " + model +
                      " --budget 25s --prompt-tokens 32 --gen-tokens 8 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = JsonOf(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["workload"], "chat");
  EXPECT_LE(j["measure_seconds"].get<double>(), 25 * 1.2);
  EXPECT_GT(j["default_score"].get<double>(), 0);
  EXPECT_GT(j["best_score"].get<double>(), 0);
  EXPECT_GE(j["trials"].size(), 3u);
  EXPECT_NE(j["llama_server_flags"].get<std::string>().find("-t "), std::string::npos);
  EXPECT_GT(j["roofline"]["fraction"].get<double>(), 0);
  // Every trial row has a measured score or a recorded error.
  for (const auto& t : j["trials"]) {
    EXPECT_TRUE(t["score"].get<double>() > 0 || !t["error"].get<std::string>().empty()) << t.dump();
  }

  std::string path = j["profile"];
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_EQ(path.rfind(dir, 0), 0u);
  toml::table t;
#if TOML_EXCEPTIONS
  ASSERT_NO_THROW(t = toml::parse_file(path));
#else
  auto parsed = toml::parse_file(path);
  ASSERT_TRUE(parsed) << parsed.error().description();
  t = std::move(parsed).table();
#endif
  EXPECT_EQ(t["profile"]["fingerprint"].value_or(std::string()), j["fingerprint"].get<std::string>());
  EXPECT_GE(t["params"]["threads"].value_or(int64_t{0}), 1);
  // The speculation stage ran by default and its choice is in the profile.
  ASSERT_TRUE(j["speculation"].is_object()) << r.output;
  EXPECT_EQ(t["speculation"]["mode"].value_or(std::string()), j["speculation"]["chosen"].get<std::string>());
  EXPECT_EQ(t["speculation"]["cost_curve"].as_array()->size(), j["speculation"]["cost_curve"].size());

  // --spec only: the saved run parameters stay, speculation is measured again
  // and rewritten in the same profile.
  auto only =
      RunCommand(ProfileEnv(dir) + HoneBinary() + " tune " + model + " --spec only --json -q 2>/dev/null");
  ASSERT_EQ(only.exit_code, 0) << only.output;
  nlohmann::json oj = JsonOf(only.output);
  ASSERT_TRUE(oj["speculation"].is_object()) << only.output;
  EXPECT_EQ(oj["params_from"], "profile");
  EXPECT_EQ(oj["profile"], path);
  EXPECT_EQ(oj["params"]["threads"].get<int64_t>(), t["params"]["threads"].value_or(int64_t{0}));
  auto again = toml::parse_file(path);
#if TOML_EXCEPTIONS
  const toml::table& t2 = again;
#else
  ASSERT_TRUE(again) << again.error().description();
  const toml::table& t2 = again.table();
#endif
  EXPECT_EQ(t2["speculation"]["mode"].value_or(std::string()),
            oj["speculation"]["chosen"].get<std::string>());
  EXPECT_EQ(t2["params"]["threads"].value_or(int64_t{0}), t["params"]["threads"].value_or(int64_t{0}));
  EXPECT_EQ(t2["profile"]["created"].value_or(std::string()),
            t["profile"]["created"].value_or(std::string()));

  auto run =
      RunCommand(ProfileEnv(dir) + HoneBinary() + " run " + model + " -p Once -n 4 --temp 0 -q --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[hone] using tuned profile " + path), std::string::npos) << run.output;
  nlohmann::json rj = JsonOf(run.output);
  EXPECT_EQ(rj["threads"].get<int64_t>(), t["params"]["threads"].value_or(int64_t{0}));

  // Explicit flags win over the profile; --no-profile ignores it.
  auto explicit_t = RunCommand(ProfileEnv(dir) + HoneBinary() + " run " + model +
                               " -p Once -n 4 --temp 0 -q --json -t 1 --threads-batch 1 --poll 7");
  ASSERT_EQ(explicit_t.exit_code, 0) << explicit_t.output;
  nlohmann::json ej = JsonOf(explicit_t.output);
  EXPECT_EQ(ej["threads"], 1);
  EXPECT_EQ(ej["poll"], 7);
  auto none = RunCommand(ProfileEnv(dir) + HoneBinary() + " run " + model + " -p Once -n 4 -q --no-profile");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(none.output.find("using tuned profile"), std::string::npos);
}

TEST(TuneCli, ServerWorkloadMeasuresConcurrentStreams) {
  std::string dir = FreshDir("profiles-server");
  auto r = RunCommand(ProfileEnv(dir) + HoneBinary() + " tune " + SharedModel("stories260K.gguf") +
                      " --workload server --concurrency 3 --budget 60s --prompt-tokens 16 --gen-tokens 8 "
                      "--json --no-save 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = JsonOf(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["workload"], "server");
  // The slot count is searched (1, 2 and 3 slots for 3 streams), and the flags carry the chosen one.
  std::set<std::string> slot_trials;
  for (const auto& t : j["trials"]) {
    if (t["stage"] == "parallel") slot_trials.insert(t["config"].get<std::string>());
  }
  // The third value is the incumbent's. On a loaded machine the budget may
  // end after the first of the two; the report must then say so. The search
  // ends when done (about 12 s here), so the 60 s budget costs nothing on a
  // quiet machine: a CI run loaded to ~3 tok/s ran out of 30 s before either.
  if (j["budget_exhausted"] == true)
    EXPECT_GE(slot_trials.size(), 1u) << r.output;
  else
    EXPECT_EQ(slot_trials.size(), 2u) << r.output;
  const int np = j["best_params"]["n_parallel"].get<int>();
  const std::string flags = j["llama_server_flags"].get<std::string>();
  if (np > 1)
    EXPECT_NE(flags.find("-np " + std::to_string(np)), std::string::npos) << flags;
  else
    EXPECT_EQ(flags.find("-np"), std::string::npos) << flags;
  EXPECT_EQ(j["profile"], "");
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// The trained TinyStories model with the 260K model (same vocabulary) as a
// draft, on prompts whose continuations the draft often gets right: every
// option measured, the cost curve, and the choice consistent with its flags.
TEST(TuneCli, SpeculationStageMeasuresDraftModelAndCostCurve) {
  const std::string prompts = TempPath("spec-prompts.txt");
  WriteFile(prompts,
            "Once upon a time, there was a little girl named Lily. She liked to play with her ball.\n"
            "Tom said, \"I like the big red ball.\" Ben said, \"I like the big red ball.\" Sue said,\n");
  auto r = RunCommand(HoneBinary() + " tune " + SharedModel("tinystories-d256-l4-f32.gguf") + " --draft " +
                      SharedModel("stories260K.gguf") + " --spec-prompts " + prompts +
                      " --budget 10s --prompt-tokens 32 --gen-tokens 16 --json --no-save 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = JsonOf(r.output);
  ASSERT_TRUE(j["speculation"].is_object()) << r.output;
  const nlohmann::json& s = j["speculation"];
  ASSERT_EQ(s["cost_k"].size(), 9u);
  ASSERT_EQ(s["cost_curve"].size(), 9u);
  EXPECT_DOUBLE_EQ(s["cost_curve"][0].get<double>(), 1.0);
  for (const auto& c : s["cost_curve"]) EXPECT_GT(c.get<double>(), 0.2) << s.dump();
  std::set<std::string> modes, options;
  for (const auto& o : s["options"]) {
    modes.insert(o["mode"].get<std::string>());
    options.insert(o["option"].get<std::string>());
    EXPECT_GT(o["tps"].get<double>(), 0) << o.dump();
    if (o["mode"] == "draft-simple") {
      // The draft model drafts on every step; trained on the same stories,
      // it is right about a third to a half of the time here (42-47% seen).
      EXPECT_GT(o["drafted"].get<int>(), 50) << o.dump();
      EXPECT_GT(o["acceptance"].get<double>(), 0.15) << o.dump();
    }
  }
  EXPECT_EQ(s["options"][0]["option"], "none");
  for (const char* m : {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "draft-simple"})
    EXPECT_EQ(modes.count(m), 1u) << m << ": " << s.dump();
  const std::string chosen = s["chosen"];
  EXPECT_EQ(modes.count(chosen), 1u) << chosen;
  const std::string flags = s["llama_server_flags"];
  if (chosen == "none") {
    EXPECT_EQ(flags, "");
  } else {
    EXPECT_NE(flags.find("--spec-type " + chosen), std::string::npos) << flags;
    EXPECT_EQ(s["confirmed"]["option"].get<std::string>().rfind(chosen, 0), 0u) << s.dump();
    EXPECT_GT(s["confirmed"]["speedup"].get<double>() - s["confirmed"]["speedup_ci95"].get<double>(), 1.0);
  }
}

TEST(TuneCli, BadInputFailsBeforeMeasuring) {
  std::string dir = FreshDir("profiles-bad");
  std::string tune = ProfileEnv(dir) + HoneBinary() + " tune ";
  std::string model = SharedModel("stories260K.gguf");
  struct Case {
    std::string args;
    int code;
    std::string says;
  } cases[] = {
      {model + " --workload interactive", 2, "unknown workload 'interactive'"},
      {model + " --budget 0.3s", 2, "too small for even one trial"},
      {model + " --budget soon", 2, "bad duration"},
      {TempPath("no-such-model.gguf"), 1, "not found"},
      {model + " --ctx 100000000", 1, "out of memory"},
      {model + " --ctx 64 --prompt-tokens 128", 2, "cannot hold"},
      {model + " --spec maybe", 2, "maybe"},
      {model + " --draft " + TempPath("no-such-draft.gguf"), 2, "no-such-draft.gguf"},
      {model + " --draft " + TinySynthModel(), 2, "cannot draft for this model: the tokenizer types differ"},
  };
  WriteFile(TempPath("tune-junk.gguf"), "this is not a gguf file at all, just text long enough to read");
  auto junk = RunCommand(tune + TempPath("tune-junk.gguf"));
  EXPECT_EQ(junk.exit_code, 1) << junk.output;
  EXPECT_NE(junk.output.find("corrupt"), std::string::npos) << junk.output;
  for (const Case& c : cases) {
    auto r = RunCommand(tune + c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("[tune"), std::string::npos) << "measured before failing: " << c.args;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace
}  // namespace hone::testing
