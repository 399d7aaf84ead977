#include "api/serve_settings.h"

#include <gtest/gtest.h>

#include <map>

#include "testing/test_env.h"

namespace hone::api {
namespace {

TEST(ConfigTest, TomlThenEnvironment) {
  std::string path = hone::testing::TempPath("serve_config_test.toml");
  hone::testing::WriteFile(path, R"(port = 9000
slots = 8
keep_alive = "10m"
pin = ["a"]
[aliases]
fast = "qwen2.5-0.5b.Q4_K_M"
)");
  ServeSettings c;
  ASSERT_TRUE(ApplyToml(c, path).ok());
  EXPECT_EQ(c.http.port, 9000);
  EXPECT_EQ(c.serve.slots, 8);
  EXPECT_EQ(c.serve.keep_alive, "10m");
  EXPECT_EQ(c.serve.pinned, std::vector<std::string>{"a"});
  EXPECT_EQ(c.serve.aliases.at("fast"), "qwen2.5-0.5b.Q4_K_M");
  std::map<std::string, std::string> env = {{"HONE_PORT", "9100"}, {"HONE_MAX_QUEUE", "3"}};
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ASSERT_TRUE(ApplyEnv(c, getenv).ok());
  EXPECT_EQ(c.http.port, 9100);
  EXPECT_EQ(c.serve.max_queue, 3);
  EXPECT_EQ(c.serve.slots, 8);
}

TEST(ConfigTest, BadValuesNameTheSetting) {
  std::string path = hone::testing::TempPath("serve_config_bad.toml");
  hone::testing::WriteFile(path, "port = \"eighty\"\n");
  ServeSettings c;
  Status s = ApplyToml(c, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("port"), std::string::npos);
  hone::testing::WriteFile(path, "port = [\n");
  EXPECT_FALSE(ApplyToml(c, path).ok());
  auto env = [](const char* n) -> const char* { return std::string(n) == "HONE_SLOTS" ? "0" : nullptr; };
  Status e = ApplyEnv(c, env);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("HONE_SLOTS"), std::string::npos);
  auto big_port = [](const char* n) -> const char* {
    return std::string(n) == "HONE_PORT" ? "99999999" : nullptr;
  };
  EXPECT_FALSE(ApplyEnv(c, big_port).ok());
}

TEST(ConfigTest, SizesAndKeys) {
  std::string path = hone::testing::TempPath("serve_keys.txt");
  hone::testing::WriteFile(path, "# comment\nsecret-one\nsecret-two  \n");
  ServeSettings c;
  c.http.api_key_file = path;
  c.http.api_keys = "env-key";
  auto keys = LoadApiKeys(c.http);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, (std::vector<std::string>{"env-key", "secret-one", "secret-two"}));
  c.http.api_key_file = path + ".missing";
  EXPECT_EQ(LoadApiKeys(c.http).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace hone::api
