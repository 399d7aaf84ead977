// Message fields of the wrong type, on every API: a 400 in the API's own
// envelope that names the field's path, before the backend (and so any
// model) is asked for anything. And Anthropic's count_tokens reads the same
// conversation as /v1/messages.
#include <gtest/gtest.h>

#include "api/anthropic_codec.h"
#include "api/driver.h"
#include "api/json_fields.h"
#include "api/ollama_codec.h"
#include "api/openai_codec.h"
#include "api/responses_codec.h"

namespace hone::api {
namespace {

// Counts every call: a request refused on its fields must not reach it.
class CountingBackend : public backend::Backend {
 public:
  Result<std::unique_ptr<backend::Completion>> Start(const backend::GenerationRequest&) override {
    ++calls;
    return MakeError(ErrorCode::kInternal, "the backend was started");
  }
  Result<backend::Embeddings> Embed(const backend::EmbeddingRequest&, const std::function<bool()>&) override {
    ++calls;
    return MakeError(ErrorCode::kInternal, "the backend was asked to embed");
  }
  std::vector<backend::ModelCard> ListModels() override { return {}; }
  Result<backend::Loaded> Load(const std::string& model, std::optional<double>) override {
    ++calls;
    return backend::Loaded{.model = model};
  }
  Result<int> CountPromptTokens(const backend::GenerationRequest& r) override {
    ++calls;
    last = r;
    return 17;
  }
  int calls = 0;
  backend::GenerationRequest last;
};

const openai::GenerationCodec kChat(/*chat=*/true);
const openai::GenerationCodec kCompletions(/*chat=*/false);
const responses::ResponsesCodec kResponses;
const anthropic::MessagesCodec kMessages;
const ollama::GenerationCodec kOllamaChat(/*chat=*/true);
const ollama::GenerationCodec kOllamaGenerate(/*chat=*/false);

HttpRequest Post(std::string body) {
  HttpRequest r;
  r.body = std::move(body);
  return r;
}

// The error's message, from any of the three envelopes.
std::string MessageOf(const HttpResponse& res) {
  auto j = nlohmann::json::parse(res.body);
  if (j["error"].is_string()) return j["error"];
  return j["error"]["message"];
}

struct Case {
  const GenerationCodec* codec;
  std::string body;
  std::string path;  // the field the 400 must name
};

void ExpectRefused(const Case& c) {
  CountingBackend backend;
  Driver driver(backend);
  HttpResponse res = driver.Generate(*c.codec, Post(c.body));
  EXPECT_EQ(res.status, 400) << c.body << " -> " << res.body;
  EXPECT_NE(MessageOf(res).find("'" + c.path), std::string::npos) << c.body << " -> " << MessageOf(res);
  EXPECT_EQ(backend.calls, 0) << c.body;
}

TEST(MessageTypes, OpenAiChatNamesTheField) {
  const std::string head = R"({"model": "m", "messages": )";
  for (const auto& [messages, path] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"role": "user", "content": 42}])", "messages[0].content"},
           {R"([{"role": "user", "content": {"text": "hi"}}])", "messages[0].content"},
           {R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": true}])",
            "messages[1].content"},
           {R"([{"role": "user", "content": [42]}])", "messages[0].content[0]"},
           {R"([{"role": "user", "content": [{"text": "hi"}]}])", "messages[0].content[0].type"},
           {R"([{"role": "user", "content": [{"type": 3, "text": "hi"}]}])", "messages[0].content[0].type"},
           {R"([{"role": "user", "content": [{"type": "video", "text": "hi"}]}])",
            "messages[0].content[0].type"},
           {R"([{"role": "user", "content": [{"type": "text", "text": 7}]}])", "messages[0].content[0].text"},
           {R"([{"role": 7, "content": "hi"}])", "messages[0].role"},
           {R"([{"role": "tool", "content": "x", "tool_call_id": 5}])", "messages[0].tool_call_id"},
           {R"([{"role": "user", "content": "x", "name": ["a"]}])", "messages[0].name"},
       }) {
    ExpectRefused({&kChat, head + messages + "}", path});
  }
}

TEST(MessageTypes, OpenAiChatStillReadsWhatItRead) {
  CountingBackend backend;
  Driver driver(backend);
  // Text parts joined; an image part and a null content (a turn of tool calls) pass as before.
  HttpResponse res = driver.Generate(kChat, Post(R"({"model": "m", "messages": [
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "assistant", "content": null}]})"));
  EXPECT_EQ(backend.calls, 1) << res.body;  // reached the backend (which refuses with 500)
}

TEST(MessageTypes, CompletionsPromptMustBeText) {
  ExpectRefused({&kCompletions, R"({"model": "m", "prompt": 42})", "prompt"});
  ExpectRefused({&kCompletions, R"({"model": "m", "prompt": {"text": "a"}})", "prompt"});
  ExpectRefused({&kCompletions, R"({"model": "m", "prompt": ["a", 3]})", "prompt[1]"});
}

TEST(MessageTypes, ResponsesNamesTheField) {
  const std::string head = R"({"model": "m", "input": )";
  for (const auto& [input, path] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"role": "user", "content": 42}])", "input[0].content"},
           {R"([{"role": 5, "content": "hi"}])", "input[0].role"},
           {R"([{"type": 3, "role": "user", "content": "hi"}])", "input[0].type"},
           {R"([{"role": "user", "content": [7]}])", "input[0].content[0]"},
           {R"([{"role": "user", "content": [{"type": "input_video"}]}])", "input[0].content[0].type"},
           {R"([{"role": "user", "content": [{"type": "input_text", "text": 3}]}])",
            "input[0].content[0].text"},
           {R"([{"type": "function_call_output", "call_id": "c", "output": 42}])", "input[0].output"},
           {R"(42)", "input"},
       }) {
    ExpectRefused({&kResponses, head + input + "}", path});
  }
}

TEST(MessageTypes, AnthropicNamesTheField) {
  const std::string head = R"({"model": "m", "max_tokens": 4, )";
  for (const auto& [rest, path] : std::vector<std::pair<std::string, std::string>>{
           {R"("messages": [{"role": "user", "content": 42}])", "messages[0].content"},
           {R"("messages": [{"role": 1, "content": "hi"}])", "messages[0].role"},
           {R"("messages": [{"role": "user", "content": [7]}])", "messages[0].content[0]"},
           {R"("messages": [{"role": "user", "content": [{"type": "mystery"}]}])",
            "messages[0].content[0].type"},
           {R"("messages": [{"role": "user", "content": [{"text": "hi"}]}])", "messages[0].content[0].type"},
           {R"("messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}])",
            "messages[0].content[0].text"},
           {R"("system": 5, "messages": [{"role": "user", "content": "hi"}])", "system"},
           {R"("system": [{"type": "text", "text": 2}], "messages": [{"role": "user", "content": "hi"}])",
            "system[0].text"},
           {R"("system": ["hi"], "messages": [{"role": "user", "content": "hi"}])", "system[0]"},
           {R"("messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                "content": [{"type": "text", "text": 2}]}]}])",
            "messages[0].content[0].content[0].text"},
       }) {
    ExpectRefused({&kMessages, head + rest + "}", path});
  }
}

TEST(MessageTypes, OllamaNamesTheField) {
  ExpectRefused({&kOllamaChat, R"({"model": "m", "messages": [{"role": "user", "content": 42}]})",
                 "messages[0].content"});
  ExpectRefused(
      {&kOllamaChat, R"({"model": "m", "messages": [{"role": [], "content": "hi"}]})", "messages[0].role"});
  ExpectRefused({&kOllamaChat,
                 R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "x"}]}]})",
                 "messages[0].content[0].type"});
  ExpectRefused({&kOllamaGenerate, R"({"model": "m", "prompt": 42})", "prompt"});
  ExpectRefused({&kOllamaGenerate, R"({"model": "m", "prompt": "hi", "system": 1})", "system"});
}

TEST(CountTokens, ReadsTheConversationMessagesWould) {
  const std::string body =
      R"({"model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be terse."}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                 {"role": "assistant", "content": "Hel"}]})";
  auto j = ParseBody(body);
  ASSERT_TRUE(j.ok());
  auto full = kMessages.Parse(*j);
  ASSERT_TRUE(full.ok()) << full.error().message;
  CountingBackend backend;
  Driver driver(backend);
  HttpRequest req = Post(body);
  req.tenant = "key-1";
  HttpResponse res = driver.CountTokens(kMessages, req);
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body), nlohmann::json::parse(R"({"input_tokens": 17})"));
  EXPECT_EQ(res.log.prompt_tokens, 17);
  const backend::GenerationRequest& counted = backend.last;
  EXPECT_EQ(counted.tenant, "key-1");
  EXPECT_EQ(counted.model, full->request.model);
  EXPECT_TRUE(counted.chat);
  ASSERT_EQ(counted.messages.size(), full->request.messages.size());
  for (size_t i = 0; i < counted.messages.size(); ++i) {
    EXPECT_EQ(counted.messages[i].role, full->request.messages[i].role);
    EXPECT_EQ(counted.messages[i].content, full->request.messages[i].content);
  }
  ASSERT_EQ(counted.tools.size(), 1u);
  EXPECT_EQ(counted.continue_final, full->request.continue_final);  // the prefill is counted as continued
  EXPECT_TRUE(counted.continue_final);
}

TEST(CountTokens, RefusesBadFieldsBeforeTheBackendAndNeedsNoMaxTokens) {
  CountingBackend backend;
  Driver driver(backend);
  HttpResponse bad =
      driver.CountTokens(kMessages, Post(R"({"model": "m", "messages": [{"role": "user", "content": 4}]})"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(MessageOf(bad).find("'messages[0].content'"), std::string::npos) << bad.body;
  EXPECT_EQ(nlohmann::json::parse(bad.body)["type"], "error");  // Anthropic's envelope
  EXPECT_EQ(backend.calls, 0);
  HttpResponse ok = driver.CountTokens(
      kMessages, Post(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  // An API without a count endpoint says so rather than counting.
  HttpResponse none =
      driver.CountTokens(kChat, Post(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(none.status, 404);
}

}  // namespace
}  // namespace hone::api
