#include "route/remote_backend.h"

#include <deque>
#include <nlohmann/json.hpp>

#include "route/keyring.h"
#include "route/sse.h"

namespace hone::route {
namespace {

// Ordered: a tool's schema goes upstream in the client's key order, so a
// routed request renders as a direct one would.
using json = nlohmann::ordered_json;
using backend::Clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A count an upstream reports, or 0 when it is absent, null or not a number
// (json::value would throw on a null).
int IntField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

int RetryAfter(const HttpCall& call) {
  const std::string v = call.Header("retry-after");
  if (v.empty()) return 0;
  char* end = nullptr;
  long s = std::strtol(v.c_str(), &end, 10);
  return end != v.c_str() && s > 0 ? static_cast<int>(std::min(s, 3600L)) : 1;
}

// The upstream's own words from an error body ({"error":{"message":...}}),
// short, with any configured key replaced by its fingerprint (some providers
// echo the key they were sent: it must never reach a client, a log or a metric).
std::string UpstreamMessage(const std::string& body, KeyRing& keys) {
  auto j = json::parse(body, nullptr, false);
  std::string m;
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    m = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
        : e.is_string()                                                    ? e.get<std::string>()
                                                                           : "";
  }
  if (m.empty()) m = body.substr(0, 200);
  return keys.Redact(m);
}

// Reads one streamed choice: SSE events in, text pieces and the end out.
class RemoteCompletion final : public backend::Completion {
 public:
  RemoteCompletion(std::unique_ptr<HttpCall> call, std::string model,
                   std::shared_ptr<std::atomic<int>> in_flight, Breaker* breaker, KeyRing* keys,
                   Clock::time_point start)
      : call_(std::move(call)),
        model_(std::move(model)),
        in_flight_(std::move(in_flight)),
        breaker_(breaker),
        keys_(keys),
        start_(start) {}
  ~RemoteCompletion() override {
    call_->Cancel();
    in_flight_->fetch_sub(1);
  }

  backend::CompletionEvent Next(Clock::time_point deadline) override {
    while (events_.empty() && !ended_) {
      std::string bytes;
      HttpCall::Read r = call_->Next(deadline, &bytes);
      if (r == HttpCall::Read::kIdle) return backend::CompletionEvent{};
      if (r == HttpCall::Read::kData) {
        for (const SseEvent& e : sse_.Feed(bytes)) Absorb(e);
        // An event that never ends (no blank line, no newline) must not grow
        // without bound: 1 MiB is far beyond any real chunk.
        if (sse_.buffered() > (1u << 20) && stream_error_.empty()) {
          stream_error_ = "the upstream sent an event of over 1 MiB";
          call_->Cancel();
        }
        if (sse_.done()) End();
      } else {
        End();
      }
    }
    if (events_.empty()) {
      backend::CompletionEvent done;
      done.kind = backend::CompletionEvent::Kind::kDone;
      return done;
    }
    backend::CompletionEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  void Cancel() override {
    cancelled_ = true;
    call_->Cancel();
  }
  size_t choices() const override { return 1; }
  const std::string& model() const override { return model_; }
  double load_seconds() const override { return 0; }

 private:
  void Absorb(const SseEvent& e) {
    auto j = json::parse(e.data, nullptr, false);
    if (!j.is_object()) {
      stream_error_ = "the upstream sent an event that is not JSON";
      return;
    }
    if (j.contains("error")) {
      stream_error_ = "the upstream reported an error mid-stream: " + UpstreamMessage(e.data, *keys_);
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      usage_.prompt_tokens = IntField(u, "prompt_tokens");
      usage_.completion_tokens = IntField(u, "completion_tokens");
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        usage_.cached_tokens = IntField(u["prompt_tokens_details"], "cached_tokens");
      got_usage_ = true;
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    std::string text;
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
        c["delta"]["content"].is_string())
      text = c["delta"]["content"].get<std::string>();
    else if (c.contains("text") && c["text"].is_string())  // the completions API
      text = c["text"].get<std::string>();
    if (!text.empty()) {
      if (!first_token_) first_token_ = Clock::now();
      ++chunks_;
      backend::CompletionEvent ev;
      ev.kind = backend::CompletionEvent::Kind::kText;
      ev.text = std::move(text);
      events_.push_back(std::move(ev));
    }
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("tool_calls") &&
        c["delta"]["tool_calls"].is_array()) {
      for (const json& t : c["delta"]["tool_calls"]) AbsorbToolCall(t);
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string())
      finish_ = c["finish_reason"].get<std::string>();
  }

  // OpenAI's delta.tool_calls piece: index, then id, name and arguments as they come.
  void AbsorbToolCall(const json& t) {
    if (!t.is_object()) return;
    backend::CompletionEvent ev;
    ev.kind = backend::CompletionEvent::Kind::kToolCall;
    ev.tool.index = t.contains("index") && t["index"].is_number_unsigned() ? t["index"].get<size_t>() : 0;
    // Calls are numbered from 0 in order; anything else would make the
    // reader allocate whatever index the upstream names.
    if (ev.tool.index > tool_calls_seen_) {
      stream_error_ = "the upstream sent tool call " + std::to_string(ev.tool.index) + " after " +
                      std::to_string(tool_calls_seen_) + " calls";
      call_->Cancel();
      return;
    }
    if (ev.tool.index == tool_calls_seen_) ++tool_calls_seen_;
    if (t.contains("id") && t["id"].is_string()) ev.tool.id = t["id"].get<std::string>();
    if (t.contains("function") && t["function"].is_object()) {
      const json& fn = t["function"];
      if (fn.contains("name") && fn["name"].is_string()) ev.tool.name = fn["name"].get<std::string>();
      if (fn.contains("arguments") && fn["arguments"].is_string())
        ev.tool.arguments = fn["arguments"].get<std::string>();
    }
    if (ev.tool.name.empty() && ev.tool.arguments.empty()) return;
    if (!first_token_) first_token_ = Clock::now();
    ++chunks_;
    tool_calls_ = true;
    events_.push_back(std::move(ev));
  }

  void End() {
    if (ended_) return;
    ended_ = true;
    backend::ChoiceResult r;
    r.usage = usage_;
    if (!got_usage_) {
      r.usage.completion_tokens = chunks_;  // an estimate: one token a chunk
      r.usage.estimated = true;
    }
    const auto now = Clock::now();
    r.queue_s = 0;
    r.prompt_s = first_token_ ? Seconds(*first_token_ - start_) : 0;
    r.generation_s = first_token_ ? Seconds(now - *first_token_) : 0;
    if (first_token_) r.ttft_s = Seconds(*first_token_ - start_);
    if (cancelled_) {
      r.finish = backend::FinishReason::kCancelled;
      r.error = MakeError(ErrorCode::kAborted, "cancelled");
    } else if (!stream_error_.empty()) {
      r.finish = backend::FinishReason::kError;
      r.error = MakeError(ErrorCode::kUpstream, stream_error_);
      breaker_->Failure();
    } else if (!finish_.empty() || sse_.done()) {
      r.finish = finish_ == "length"                      ? backend::FinishReason::kLength
                 : finish_ == "tool_calls" || tool_calls_ ? backend::FinishReason::kToolCalls
                                                          : backend::FinishReason::kStop;
      breaker_->Success();
    } else {
      const TransportError t = call_->error();
      const std::string detail = call_->error_text();
      r.finish = t == TransportError::kTimeout ? backend::FinishReason::kTimeout : backend::FinishReason::kError;
      r.error = MakeError(t == TransportError::kTimeout ? ErrorCode::kTimeout : ErrorCode::kUpstream,
                          "the upstream stream broke after " + std::to_string(chunks_) +
                              " chunks without finishing" + (detail.empty() ? "" : " (" + detail + ")"));
      breaker_->Failure();
    }
    backend::CompletionEvent ev;
    ev.kind = backend::CompletionEvent::Kind::kChoiceEnd;
    ev.result = std::move(r);
    events_.push_back(std::move(ev));
  }

  std::unique_ptr<HttpCall> call_;
  const std::string model_;
  std::shared_ptr<std::atomic<int>> in_flight_;
  Breaker* breaker_;
  KeyRing* keys_;  // the upstream's, for redaction
  const Clock::time_point start_;
  SseParser sse_;
  std::deque<backend::CompletionEvent> events_;
  backend::Usage usage_;
  bool got_usage_ = false;
  bool tool_calls_ = false;  // the upstream made calls (its finish_reason may say "stop")
  size_t tool_calls_seen_ = 0;
  int chunks_ = 0;
  std::string finish_, stream_error_;
  std::optional<Clock::time_point> first_token_;
  bool ended_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::string OpenAiBody(const backend::GenerationRequest& r, const std::string& model, bool continuation) {
  json j = {{"model", model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (r.chat) {
    json msgs = json::array();
    for (const backend::Message& m : r.messages) {
      json msg = {{"role", m.role}, {"content", m.content}};
      if (!m.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& c : m.tool_calls) {
          calls.push_back({{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        msg["tool_calls"] = calls;
        if (m.content.empty()) msg["content"] = nullptr;
      }
      if (!m.tool_call_id.empty()) msg["tool_call_id"] = m.tool_call_id;
      if (m.role == "tool" && !m.name.empty()) msg["name"] = m.name;
      msgs.push_back(std::move(msg));
    }
    j["messages"] = msgs;
    // Tools in OpenAI's chat form, whatever API the client spoke.
    if (!r.tools.empty()) {
      json tools = json::array();
      for (const auto& t : r.tools) {
        json fn = {{"name", t.name},
                   {"parameters", t.parameters.empty() ? json{{"type", "object"}}
                                                       : json::parse(t.parameters, nullptr, false)}};
        if (!t.description.empty()) fn["description"] = t.description;
        tools.push_back({{"type", "function"}, {"function", fn}});
      }
      j["tools"] = tools;
      switch (r.tool_choice.mode) {
        case backend::ToolChoice::Mode::kAuto:
          break;
        case backend::ToolChoice::Mode::kNone:
          j["tool_choice"] = "none";
          break;
        case backend::ToolChoice::Mode::kRequired:
          j["tool_choice"] =
              r.tool_choice.function.empty()
                  ? json("required")
                  : json{{"type", "function"}, {"function", {{"name", r.tool_choice.function}}}};
          break;
      }
      if (r.parallel_tool_calls) j["parallel_tool_calls"] = *r.parallel_tool_calls;
    }
    // A trailing assistant message is a prefix to continue (vLLM's and
    // llama-server's spelling; hone serve continues it as well).
    if (continuation && r.continue_final) {
      j["continue_final_message"] = true;
      j["add_generation_prompt"] = false;
    }
  } else {
    j["prompt"] = r.prompts.empty() ? "" : r.prompts[0];
  }
  if (r.max_tokens >= 0) j["max_tokens"] = r.max_tokens;
  const backend::Sampling& s = r.sampling;
  if (s.temperature) j["temperature"] = *s.temperature;
  if (s.top_p) j["top_p"] = *s.top_p;
  if (s.seed) j["seed"] = *s.seed;
  if (s.presence_penalty) j["presence_penalty"] = *s.presence_penalty;
  if (s.frequency_penalty) j["frequency_penalty"] = *s.frequency_penalty;
  // Not OpenAI's, but what the client asked for; vLLM, llama-server and hone take them.
  if (s.top_k) j["top_k"] = *s.top_k;
  if (s.min_p) j["min_p"] = *s.min_p;
  if (s.repeat_penalty) j["repeat_penalty"] = *s.repeat_penalty;
  if (!r.stop.empty()) j["stop"] = r.stop;
  switch (r.format.type) {
    case backend::ResponseFormat::Type::kNone:
      break;
    case backend::ResponseFormat::Type::kJsonObject:
      j["response_format"] = {{"type", "json_object"}};
      break;
    case backend::ResponseFormat::Type::kJsonSchema:
      j["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "response"}, {"schema", r.format.schema}}}};
      break;
  }
  return j.dump();
}

RemoteBackend::RemoteBackend(UpstreamConfig config, HttpClient& http)
    : config_(std::move(config)),
      http_(http),
      breaker_(config_.breaker),
      keys_(config_.keys),
      queue_(keys_, KeyQueueOptions{.open_window = std::max(1, config_.max_concurrent)}) {}

std::string RemoteBackend::UpstreamModel(const std::string& model) const {
  auto it = config_.models.find(model);
  return it == config_.models.end() ? model : it->second;
}

HttpSpec RemoteBackend::Spec(const std::string& path, const std::string& body, const std::string& key,
                             const std::string& ledger_id) const {
  HttpSpec s;
  s.method = body.empty() ? "GET" : "POST";
  s.url = config_.base_url + path;
  s.body = body;
  s.headers = {"Content-Type: application/json", "Accept: text/event-stream, application/json"};
  if (!key.empty()) s.headers.push_back("Authorization: Bearer " + key);
  // The ledger row's id: an upstream's own log can be reconciled with hone's.
  if (!ledger_id.empty()) s.headers.push_back("X-Hone-Request-Id: " + ledger_id);
  s.connect_timeout_s = config_.connect_timeout_s;
  s.first_byte_timeout_s = config_.first_byte_timeout_s;
  s.idle_timeout_s = config_.idle_timeout_s;
  s.total_timeout_s = config_.total_timeout_s;
  s.ca_file = config_.ca_file;
  return s;
}

Error RemoteBackend::NoAnswer(HttpCall& call, AttemptInfo* info, Clock::time_point start,
                             Clock::time_point route_deadline) {
  const std::string where = "upstream '" + config_.name + "'";
  // Read how the call ended before cancelling it: a cancel ends it too.
  const bool ended = call.done();
  const std::string why = call.error_text();
  const bool timeout = call.error() == TransportError::kTimeout || !ended;
  call.Cancel();
  info->outcome = timeout ? Outcome::kTimeout : Outcome::kConnect;
  // Cut short by the route's deadline, not by this upstream's own timeout:
  // no verdict on the upstream.
  const bool cut_by_route =
      !ended && Clock::now() >= route_deadline &&
      route_deadline < start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(config_.first_byte_timeout_s));
  if (!cut_by_route) breaker_.Failure();
  return MakeError(timeout ? ErrorCode::kTimeout : ErrorCode::kUpstream,
                   where + (timeout ? ": no response in time" : ": cannot connect") +
                       (!ended || why.empty() ? "" : " (" + why + ")"));
}

Error RemoteBackend::Refusal(HttpCall& call, int status, Outcome outcome, int retry_after) {
  const std::string where = "upstream '" + config_.name + "'";
  const std::string body = call.ReadAll(Clock::now() + std::chrono::seconds(2), 64 << 10);
  const std::string said =
      where + " answered HTTP " + std::to_string(status) + ": " + UpstreamMessage(body, keys_);
  Error e{ErrorCode::kUpstream, said};
  switch (outcome) {
    case Outcome::kRateLimited:
      e.code = ErrorCode::kRateLimited;
      e.retry_after_s = retry_after > 0 ? retry_after : 1;
      break;
    case Outcome::kAuth:
      e.code = ErrorCode::kUnavailable;
      break;
    case Outcome::kClient:
      e.code = status == 404 ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument;
      e.upstream_status = status;
      break;
    default:
      e.retry_after_s = retry_after;
      breaker_.Failure();
      break;
  }
  return e;
}

Result<std::unique_ptr<backend::Completion>> RemoteBackend::StartAttempt(const backend::GenerationRequest& r,
                                                                       AttemptInfo* info,
                                                                       Clock::time_point route_deadline,
                                                                       KeyQueue::Ticket* ticket) {
  const std::string where = "upstream '" + config_.name + "'";
  if (!r.chat && r.prompts.size() > 1)
    return MakeError(ErrorCode::kInvalidArgument, where + " takes one prompt per request");
  // The key first: a request waiting in the queue holds no in-flight slot.
  KeyQueue::Ticket own;
  auto key = queue_.Acquire(ticket ? ticket : &own, route_deadline, r.cancelled);
  if (!key) {
    Error e = key.error();
    e.message = where + ": " + e.message;
    info->no_key = true;
    info->outcome = e.code == ErrorCode::kUnavailable   ? Outcome::kAuth
                    : e.code == ErrorCode::kRateLimited ? Outcome::kRateLimited
                                                        : Outcome::kOk;  // the client left
    return e;
  }
  // Every pick is reported to the queue once, as soon as its status is known.
  struct Report {
    KeyQueue* queue;
    const KeyRing::Pick* pick;
    void operator()(KeyQueue::Verdict v) {
      if (queue) queue->Report(*pick, v);
      queue = nullptr;
    }
    ~Report() { (*this)(KeyQueue::Verdict::kNotSent); }
  } report{&queue_, &*key};
  if (in_flight_.fetch_add(1) >= config_.max_concurrent) {
    in_flight_.fetch_sub(1);
    Error e = MakeError(ErrorCode::kBusy,
                        where + " is at its max_concurrent (" + std::to_string(config_.max_concurrent) + ")");
    e.retry_after_s = 1;
    return e;
  }
  struct Release {  // gives the in-flight slot back unless a completion takes it over
    std::atomic<int>* n;
    ~Release() {
      if (n) n->fetch_sub(1);
    }
  } release{&in_flight_};
  info->key_fingerprint = key->fingerprint;
  const auto start = Clock::now();
  if (start >= route_deadline) {
    info->outcome = Outcome::kTimeout;
    return MakeError(ErrorCode::kTimeout, where + ": the route's deadline passed before this attempt");
  }
  const std::string path = r.chat ? "/chat/completions" : "/completions";
  std::unique_ptr<HttpCall> call =
      http_.Start(Spec(path, OpenAiBody(r, UpstreamModel(r.model), config_.continuation), key->key, r.routing.ledger_id));
  const auto wait_until =
      std::min(route_deadline, start + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.first_byte_timeout_s + 1)));
  int status = 0;
  // In slices, so a client that leaves before the first byte cancels the
  // upstream call at once (the upstream sees the connection close).
  while (!status && Clock::now() < wait_until && !call->done()) {
    if (r.cancelled && r.cancelled()) {
      call->Cancel();
      info->outcome = Outcome::kOk;
      return MakeError(ErrorCode::kAborted, "the client left before " + where + " answered");
    }
    status = call->WaitStatus(std::min(wait_until, Clock::now() + std::chrono::milliseconds(100)));
  }
  if (!status && call->done()) status = call->WaitStatus(Clock::now());
  info->http_status = status;
  if (status == 0) return NoAnswer(*call, info, start, route_deadline);
  info->outcome = ClassifyStatus(status);
  if (info->outcome != Outcome::kOk) {
    const int retry_after = RetryAfter(*call);
    // The key's state changes before the body is read (up to 2 s), so the
    // queue releases no other request onto a key that just said 429 or 401.
    if (info->outcome == Outcome::kRateLimited) {
      keys_.RateLimited(*key, retry_after);  // the ring first: the queue reads its cooldown
      report(KeyQueue::Verdict::kRateLimited);
    } else if (info->outcome == Outcome::kAuth) {
      keys_.Rejected(*key, status);
    }
    report(KeyQueue::Verdict::kOther);  // (a no-op after a 429's report)
    return Refusal(*call, status, info->outcome, retry_after);
  }
  report(KeyQueue::Verdict::kAccepted);
  release.n = nullptr;  // the completion gives the slot back when it ends
  return std::unique_ptr<backend::Completion>(
      new RemoteCompletion(std::move(call), r.model, in_flight_count_, &breaker_, &keys_, start));
}

Result<backend::Embeddings> RemoteBackend::Embed(const backend::EmbeddingRequest& r,
                                               const std::function<bool()>& cancelled) {
  auto key = keys_.Next();
  if (!key)
    return MakeError(ErrorCode::kUnavailable, "upstream '" + config_.name + "' has no usable API key");
  json body = {{"model", UpstreamModel(r.model)}, {"input", r.inputs}};
  auto call = http_.Start(Spec("/embeddings", body.dump(), key->key));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.total_timeout_s));
  int status = 0;
  while (!(status = call->WaitStatus(std::min(deadline, Clock::now() + std::chrono::milliseconds(200))))) {
    if (cancelled()) return MakeError(ErrorCode::kAborted, "cancelled");
    if (call->done() || Clock::now() >= deadline)
      return MakeError(ErrorCode::kUpstream, "upstream '" + config_.name + "': " + call->error_text());
  }
  const std::string text = call->ReadAll(deadline);
  if (status != 200)
    return MakeError(ErrorCode::kUpstream, "upstream '" + config_.name + "' answered HTTP " +
                                               std::to_string(status) + ": " + UpstreamMessage(text, keys_));
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return MakeError(ErrorCode::kUpstream, "upstream '" + config_.name + "' sent no embeddings");
  backend::Embeddings out;
  out.model = r.model;
  for (const json& d : j["data"]) {
    auto e = d.is_object() ? d.find("embedding") : d.end();
    if (!d.is_object() || e == d.end() || !e->is_array())
      return MakeError(ErrorCode::kUpstream,
                       "upstream '" + config_.name + "' sent an embedding that is not a float array");
    std::vector<float> v;
    for (const json& x : *e) v.push_back(x.is_number() ? x.get<float>() : 0.f);
    out.vectors.push_back(std::move(v));
  }
  if (j.contains("usage") && j["usage"].is_object())
    out.prompt_tokens = IntField(j["usage"], "prompt_tokens");
  return out;
}

std::vector<backend::ModelCard> RemoteBackend::ListModels() {
  std::vector<backend::ModelCard> out;
  for (const auto& [name, theirs] : config_.models) out.push_back(backend::ModelCard{.name = name});
  return out;
}

Result<backend::Loaded> RemoteBackend::Load(const std::string& model, std::optional<double>) {
  return backend::Loaded{.model = model};  // nothing to load: the upstream keeps its own models
}

Status RemoteBackend::CheckHealth() {
  auto key = keys_.Next();
  if (!key) return MakeError(ErrorCode::kUnavailable, "no usable API key");
  HttpSpec s = Spec(config_.health_path, "", key->key);
  s.first_byte_timeout_s = std::min(s.first_byte_timeout_s, 10.0);
  auto call = http_.Start(s);
  const int status = call->WaitStatus(Clock::now() + std::chrono::seconds(15));
  // A key refused on the models list may still be good for completions
  // (restricted scopes): a health check reports, it never revokes a key.
  if (status >= 200 && status < 300) return {};
  return MakeError(ErrorCode::kUpstream,
                   status ? "HTTP " + std::to_string(status) : "unreachable: " + call->error_text());
}

Result<std::string> RemoteBackend::FetchMetrics() {
  HttpSpec s = Spec("", "", "");
  s.method = "GET";
  s.url = config_.metrics_url;
  s.headers = {"Accept: text/plain"};
  if (auto key = keys_.Next(); key && !key->key.empty()) s.headers.push_back("Authorization: Bearer " + key->key);
  s.connect_timeout_s = std::min(s.connect_timeout_s, 1.0);
  s.first_byte_timeout_s = s.idle_timeout_s = s.total_timeout_s = 2;
  auto call = http_.Start(s);
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  const int status = call->WaitStatus(deadline);
  if (status != 200)
    return MakeError(ErrorCode::kUpstream, status ? "metrics: HTTP " + std::to_string(status)
                                                  : "metrics unreachable: " + call->error_text());
  std::string body = call->ReadAll(deadline, 4u << 20);
  // A cut body would make the models missing from it look idle.
  if (!call->done() || call->error() != TransportError::kNone)
    return MakeError(ErrorCode::kUpstream, "metrics: the body was cut short (" + call->error_text() + ")");
  return body;
}

}  // namespace hone::route
