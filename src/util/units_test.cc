#include "util/units.h"

#include <gtest/gtest.h>

namespace hone {
namespace {

TEST(ParseDurationTest, AcceptsEveryFormCommandsUse) {
  EXPECT_DOUBLE_EQ(*ParseDuration("90"), 90);  // tune --budget, routes.toml
  EXPECT_DOUBLE_EQ(*ParseDuration("1.5"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseDuration("90s"), 90);
  EXPECT_DOUBLE_EQ(*ParseDuration("5m"), 300);  // keep_alive
  EXPECT_DOUBLE_EQ(*ParseDuration("2h"), 7200);
  EXPECT_DOUBLE_EQ(*ParseDuration("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDuration("1m30.5s"), 90.5);
  EXPECT_DOUBLE_EQ(*ParseDuration("250ms"), 0.25);  // routes.toml backoff
  EXPECT_DOUBLE_EQ(*ParseDuration("0"), 0);
  EXPECT_DOUBLE_EQ(*ParseDuration(" 30s\n"), 30);
  EXPECT_LT(*ParseDuration("-1"), 0);  // keep_alive: forever
  EXPECT_DOUBLE_EQ(*ParseDuration("-5m"), -300);
}

TEST(ParseDurationTest, RefusesWithTheAcceptedForms) {
  for (const char* bad : {"", "-", "m", "s", "5x", "5d", "1h30", "5 minutes", ".", "1e400", "--1", "3m-2s"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(r.error().message.find("1h30m"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(ParseDuration("5d").error().message.find("unknown unit 'd'"), std::string::npos);
  // Found by fuzz_ollama_request (keep_alive): these threw out of std::stod.
  for (const char* bad : {"..s", "-.", "1.2.3m"}) EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  EXPECT_FALSE(ParseDuration(std::string(400, '9')).ok());
}

TEST(ParseSizeTest, AcceptsEveryFormCommandsUse) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("48K"), 48u * 1024);  // sysfs cache sizes
  EXPECT_EQ(*ParseSize("32M\n"), 32u << 20);
  EXPECT_EQ(*ParseSize("8M"), 8u << 20);  // --max-body
  EXPECT_EQ(*ParseSize("2G"), 2ull << 30);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);  // bench --max-ram
  EXPECT_EQ(*ParseSize("512mib"), 512ull << 20);
  EXPECT_EQ(*ParseSize("8GB"), 8ull << 30);
  EXPECT_EQ(*ParseSize("2T"), 2ull << 40);
  EXPECT_EQ(*ParseSize("100B"), 100u);
  EXPECT_EQ(*ParseSize("0"), 0u);
}

TEST(ParseSizeTest, Refuses) {
  for (const char* bad : {"", "K", "12Q", "8 bananas", "-1G", "8GX", "1e30T", "8G8", "."}) {
    auto r = ParseSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace hone
