#include "serve/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "testing/test_env.h"

namespace hone::serve {
namespace {

namespace fs = std::filesystem;

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test process: CTest runs this fixture's tests in parallel,
    // and one's TearDown must not remove the folder another is reading.
    dir_ = hone::testing::TempPath("registry_test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    hone::testing::WriteFile(dir_ + "/alpha.Q4_K_M.gguf", "x");
    hone::testing::WriteFile(dir_ + "/beta.gguf", "x");
    hone::testing::WriteFile(dir_ + "/notes.txt", "x");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RegistryTest, NamesComeFromFileStemsAndAliases) {
  auto r = Registry::Build(dir_, {}, {{"fast", "alpha.Q4_K_M"}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->entries().size(), 2u);  // notes.txt is not a model
  EXPECT_EQ((*r->Resolve("beta"))->name, "beta");
  EXPECT_EQ((*r->Resolve("fast"))->name, "alpha.Q4_K_M");
  EXPECT_EQ((*r->Resolve("beta:latest"))->name, "beta");  // Ollama clients add a tag
  EXPECT_EQ((*r->Resolve("fast"))->aliases, std::vector<std::string>{"fast"});
}

TEST_F(RegistryTest, PathsAndUnknownNamesAreRefused) {
  auto r = Registry::Build(dir_, {}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Resolve(dir_ + "/beta.gguf").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r->Resolve("../beta").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r->Resolve("gamma").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r->Resolve("").error().code, ErrorCode::kInvalidArgument);
}

TEST_F(RegistryTest, BadInputsGivePreciseErrors) {
  EXPECT_EQ(Registry::Build(dir_ + "/missing", {}, {}).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(Registry::Build("", {dir_ + "/nope.gguf"}, {}).error().code, ErrorCode::kNotFound);
  auto bad_alias = Registry::Build(dir_, {}, {{"x", "gamma"}});
  ASSERT_FALSE(bad_alias.ok());
  EXPECT_NE(bad_alias.error().message.find("gamma"), std::string::npos);
  fs::create_directories(dir_ + "/other");
  hone::testing::WriteFile(dir_ + "/other/beta.gguf", "x");
  EXPECT_EQ(Registry::Build(dir_, {dir_ + "/other/beta.gguf"}, {}).error().code, ErrorCode::kInvalidArgument);
  // The same file from the folder and from -m is one model.
  auto same = Registry::Build(dir_, {dir_ + "/beta.gguf"}, {});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->entries().size(), 2u);
}

}  // namespace
}  // namespace hone::serve
