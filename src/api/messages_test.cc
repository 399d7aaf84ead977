#include "api/messages.h"

#include <gtest/gtest.h>

namespace hone::api {
namespace {

using nlohmann::json;

TEST(ParseMessages, ReadsRolesAndContentParts) {
  auto m = ParseMessages(json::parse(R"([
    {"role": "developer", "content": "be terse"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"},
                                 {"type": "text", "text": "b"}]},
    {"role": "assistant"}
  ])"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].role, "system");
  EXPECT_EQ((*m)[0].content, "be terse");
  EXPECT_EQ((*m)[1].content, "ab");
  EXPECT_EQ((*m)[2].content, "");
}

TEST(ParseMessages, RejectsWhatEitherApiWouldReject) {
  for (const char* bad : {R"({"role": "user"})", R"([1])", R"([{"content": "x"}])", R"([{"role": 3}])",
                          R"([{"role": "wizard", "content": "x"}])"}) {
    auto m = ParseMessages(json::parse(bad));
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  auto m = ParseMessages(json::parse(R"([{"role": "wizard", "content": "x"}])"));
  EXPECT_EQ(m.error().message, "unknown message role 'wizard'");
}

}  // namespace
}  // namespace hone::api
