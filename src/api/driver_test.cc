// The driver over a scripted backend: what both APIs' clients see for the
// same events, without a model.
#include "api/driver.h"

#include <gtest/gtest.h>

#include <deque>

#include "api/ollama_codec.h"
#include "api/openai_codec.h"

namespace hone::api {
namespace {

using backend::CompletionEvent;
using Kind = backend::CompletionEvent::Kind;

CompletionEvent Event(Kind kind, size_t choice, std::string text = "") {
  CompletionEvent e;
  e.kind = kind, e.choice = choice, e.text = std::move(text);
  return e;
}

// Hands out a fixed list of events, then kDone.
class ScriptedCompletion : public backend::Completion {
 public:
  ScriptedCompletion(std::deque<CompletionEvent> events, size_t choices, bool* cancelled)
      : events_(std::move(events)), choices_(choices), cancelled_(cancelled) {}
  CompletionEvent Next(backend::Clock::time_point) override {
    if (events_.empty()) return Event(Kind::kDone, 0);
    CompletionEvent e = events_.front();
    events_.pop_front();
    return e;
  }
  void Cancel() override { *cancelled_ = true; }
  size_t choices() const override { return choices_; }
  const std::string& model() const override { return model_; }
  double load_seconds() const override { return 0; }

 private:
  std::deque<CompletionEvent> events_;
  size_t choices_;
  bool* cancelled_;
  std::string model_ = "m";
};

class ScriptedBackend : public backend::Backend {
 public:
  Result<std::unique_ptr<backend::Completion>> Start(const backend::GenerationRequest& r) override {
    last = r;
    if (refuse) return *refuse;
    return std::unique_ptr<backend::Completion>(new ScriptedCompletion(events, choices, &cancelled));
  }
  Result<backend::Embeddings> Embed(const backend::EmbeddingRequest&, const std::function<bool()>&) override {
    return backend::Embeddings{"m", {{1, 0}}, 2, 0};
  }
  std::vector<backend::ModelCard> ListModels() override { return {{"m", 1, std::nullopt}}; }
  Result<backend::Loaded> Load(const std::string& model, std::optional<double>) override {
    return backend::Loaded{.model = model};
  }

  std::deque<CompletionEvent> events;
  size_t choices = 1;
  std::optional<Error> refuse;
  backend::GenerationRequest last;
  bool cancelled = false;
};

CompletionEvent Text(size_t choice, std::string t) { return Event(Kind::kText, choice, std::move(t)); }
CompletionEvent End(size_t choice, backend::FinishReason f = backend::FinishReason::kStop,
                    std::optional<Error> error = {}) {
  CompletionEvent e = Event(Kind::kChoiceEnd, choice);
  e.result.finish = f;
  e.result.error = error;
  e.result.usage = {3, 1, 2};
  return e;
}

HttpRequest Post(std::string body) {
  HttpRequest r;
  r.body = std::move(body);
  return r;
}

std::string RunStream(const HttpResponse& res) {
  std::string out;
  RequestLog log;
  res.stream([&](const std::string& chunk) { return out += chunk, true; }, &log);
  return out;
}

TEST(Driver, CollectsEveryChoiceOfACompletionArray) {
  ScriptedBackend b;
  b.choices = 2;
  b.events = {Text(0, "a"), Text(0, "b"), End(0), Text(1, "c"), End(1, backend::FinishReason::kLength)};
  Driver d(b);
  openai::GenerationCodec codec(/*chat=*/false);
  HttpResponse res = d.Generate(codec, Post(R"({"model":"m","prompt":["x","y"]})"));
  ASSERT_EQ(res.status, 200) << res.body;
  auto j = nlohmann::json::parse(res.body);
  EXPECT_EQ(j["choices"][0]["text"], "ab");
  EXPECT_EQ(j["choices"][1]["text"], "c");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(b.last.prompts.size(), 2u);
  EXPECT_EQ(b.last.max_tokens, 16);
}

TEST(Driver, StreamsAndEndsWithAnErrorFrameOnFailure) {
  ScriptedBackend b;
  b.events = {Text(0, "hi"),
              End(0, backend::FinishReason::kTimeout, MakeError(ErrorCode::kTimeout, "too slow"))};
  Driver d(b);
  openai::GenerationCodec chat(/*chat=*/true);
  HttpResponse res =
      d.Generate(chat, Post(R"({"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(res.stream);
  std::string sse = RunStream(res);
  EXPECT_NE(sse.find(R"("role":"assistant")"), std::string::npos);
  EXPECT_NE(sse.find(R"("content":"hi")"), std::string::npos);
  EXPECT_NE(sse.find(R"("code":"timeout")"), std::string::npos);
  EXPECT_EQ(sse.find("[DONE]"), std::string::npos) << "never a clean end after a failure";

  b.events = {Text(0, "hi"), End(0, backend::FinishReason::kError, MakeError(ErrorCode::kInternal, "boom"))};
  ollama::GenerationCodec ollama_chat(/*chat=*/true);
  std::string nd =
      RunStream(d.Generate(ollama_chat, Post(R"({"model":"m","messages":[{"role":"user","content":"x"}]})")));
  EXPECT_NE(nd.find(R"({"error":"boom"})"), std::string::npos) << nd;
}

// hone's stream_options.include_route: the router's note on each choice's
// last chunk, only when asked for, and a clear 400 for a value not a bool.
TEST(Driver, TheRouteNoteIsStreamedOnlyWhenAskedFor) {
  ScriptedBackend b;
  CompletionEvent end = End(0);
  end.result.route = "route=support target=cloud:gpt attempts=1";
  b.events = {Text(0, "hi"), end};
  Driver d(b);
  openai::GenerationCodec chat(/*chat=*/true);
  const std::string asked =
      RunStream(d.Generate(chat, Post(R"({"model":"m","stream":true,"stream_options":{"include_route":true},)"
                                      R"("messages":[{"role":"user","content":"x"}]})")));
  EXPECT_NE(asked.find(R"("hone_route":"route=support target=cloud:gpt attempts=1")"), std::string::npos)
      << asked;
  // Once: on the choice's last chunk, not on the text before it.
  EXPECT_EQ(asked.find("hone_route"), asked.rfind("hone_route"));
  b.events = {Text(0, "hi"), end};
  const std::string plain = RunStream(
      d.Generate(chat, Post(R"({"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]})")));
  EXPECT_EQ(plain.find("hone_route"), std::string::npos) << plain;
  HttpResponse bad =
      d.Generate(chat, Post(R"({"model":"m","stream":true,"stream_options":{"include_route":"yes"},)"
                            R"("messages":[{"role":"user","content":"x"}]})"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("include_route"), std::string::npos) << bad.body;
}

TEST(Driver, BusyIs429ForOpenAIAnd503ForOllamaWithRetryAfter) {
  ScriptedBackend b;
  Error busy = MakeError(ErrorCode::kBusy, "full");
  busy.retry_after_s = 1;
  b.refuse = busy;
  Driver d(b);
  openai::GenerationCodec completions(/*chat=*/false);
  ollama::GenerationCodec generate(/*chat=*/false);
  HttpResponse o = d.Generate(completions, Post(R"({"model":"m","prompt":"x"})"));
  HttpResponse l = d.Generate(generate, Post(R"({"model":"m","prompt":"x"})"));
  EXPECT_EQ(o.status, 429);
  EXPECT_EQ(l.status, 503);
  EXPECT_EQ(o.headers["Retry-After"], "1");
  EXPECT_EQ(l.headers["Retry-After"], "1");
  EXPECT_EQ(nlohmann::json::parse(o.body)["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(nlohmann::json::parse(l.body)["error"], "full");
}

TEST(Driver, BothApisRejectAnUnknownRoleAlike) {
  ScriptedBackend b;
  Driver d(b);
  openai::GenerationCodec openai_chat(/*chat=*/true);
  ollama::GenerationCodec ollama_chat(/*chat=*/true);
  const std::string body = R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})";
  HttpResponse o = d.Generate(openai_chat, Post(body));
  HttpResponse l = d.Generate(ollama_chat, Post(body));
  EXPECT_EQ(o.status, 400);
  EXPECT_EQ(l.status, 400);
  EXPECT_EQ(nlohmann::json::parse(l.body)["error"], "unknown message role 'wizard'");
}

TEST(Driver, AClientGoneBeforeANonStreamedAnswerCancelsIt) {
  ScriptedBackend b;
  b.events = {Text(0, "a"), End(0, backend::FinishReason::kCancelled, MakeError(ErrorCode::kInternal, "x"))};
  Driver d(b);
  openai::GenerationCodec completions(/*chat=*/false);
  HttpRequest r = Post(R"({"model":"m","prompt":"x"})");
  r.client_gone = [] { return true; };
  HttpResponse res = d.Generate(completions, r);
  EXPECT_TRUE(b.cancelled);
  EXPECT_EQ(res.status, 499);
  EXPECT_EQ(res.log.finish, "cancelled");
  EXPECT_TRUE(res.log.error.empty());
}

TEST(Driver, OllamaEmptyPromptOnlyLoads) {
  ScriptedBackend b;
  Driver d(b);
  ollama::GenerationCodec generate(/*chat=*/false);
  HttpResponse res = d.Generate(generate, Post(R"({"model":"m","prompt":"","keep_alive":0})"));
  ASSERT_EQ(res.status, 200);
  EXPECT_EQ(nlohmann::json::parse(res.body)["done_reason"], "unload");
}

}  // namespace
}  // namespace hone::api
