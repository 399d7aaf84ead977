#include "api/messages.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

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

TEST(ParseMessages, NamesTheFieldOfTheWrongType) {
  for (const auto& [bad, message] : std::vector<std::pair<const char*, const char*>>{
           {R"([{"role": "user", "content": 42}])",
            "'messages[0].content' must be a string or an array of content parts"},
           {R"([{"role": "user", "content": "a"}, {"role": "user", "content": [3]}])",
            "'messages[1].content[0]' must be an object"},
           {R"([{"role": "user", "content": [{"type": "text", "text": null}]}])",
            "'messages[0].content[0].text' is required"},
           {R"([{"role": "user", "content": [{"type": "audio"}]}])",
            "'messages[0].content[0].type' 'audio' is not a content part type (text, image_url, input_audio, "
            "file, refusal)"},
           {R"([{"role": true}])", "'messages[0].role' must be a string"},
           {R"([7])", "'messages[0]' must be an object"},
       }) {
    auto m = ParseMessages(json::parse(bad));
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_EQ(m.error().message, message) << bad;
  }
}

}  // namespace
}  // namespace hone::api
