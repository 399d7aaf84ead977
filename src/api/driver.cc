#include "api/driver.h"

#include <memory>

#include "api/json_fields.h"

namespace hone::api {
namespace {

using backend::Clock;
using backend::CompletionEvent;
using Kind = backend::CompletionEvent::Kind;

// How long one wait for text lasts before the driver checks the client.
constexpr auto kPoll = std::chrono::milliseconds(100);

// The server stops before this answer is done: cancel it, and say so.
Error ShuttingDown() {
  Error e = MakeError(ErrorCode::kUnavailable, "the server is shutting down; the answer was cut short");
  e.retry_after_s = 1;
  return e;
}

// Adds one choice's end to the log line. A choice the client walked away from
// logs no error: it was cancelled, nothing failed.
void LogChoice(const std::string& model, const backend::ChoiceResult& r, bool client_left, RequestLog* log) {
  log->model = model;
  if (!r.route.empty()) log->route = r.route;
  log->prompt_tokens += r.usage.prompt_tokens;
  log->completion_tokens += r.usage.completion_tokens;
  log->draft_tokens += r.usage.draft_tokens;
  log->accepted_tokens += r.usage.accepted_tokens;
  if (log->ttft_ms < 0 && r.ttft_s) log->ttft_ms = *r.ttft_s * 1000;
  if (log->queue_ms < 0) log->queue_ms = r.queue_s * 1000;
  log->finish = backend::FinishReasonName(r.finish);
  if (r.error && !client_left && !r.error->message.empty()) log->error = r.error->message;
}

// The client is gone: stop the work and wait the step it takes for the
// current choice to end, so the log line reports how far it got.
void Abandon(backend::Completion& run, RequestLog* log) {
  run.Cancel();
  for (;;) {
    CompletionEvent e = run.Next(Clock::now() + kPoll);
    if (e.kind == Kind::kDone) return;
    if (e.kind == Kind::kChoiceEnd) return LogChoice(run.model(), e.result, /*client_left=*/true, log);
  }
}

// Tool calls arrive in pieces: the first names the call, the rest extend its arguments.
void AddToolCallPiece(const backend::ToolCallDelta& d, std::vector<backend::ToolCall>* calls) {
  if (calls->size() <= d.index) calls->resize(d.index + 1);
  backend::ToolCall& c = (*calls)[d.index];
  if (!d.id.empty()) c.id = d.id;
  if (!d.name.empty()) c.name = d.name;
  c.arguments += d.arguments;
}

HttpResponse Collect(const GenerationCodec& codec, backend::Completion& run, const Answer& answer,
                     const std::function<bool()>& client_gone, const std::function<bool()>& stopping) {
  HttpResponse res;
  std::vector<CollectedChoice> choices(run.choices());
  backend::Usage total;
  for (;;) {
    if (stopping()) {
      run.Cancel();
      return codec.Fail(ShuttingDown());
    }
    CompletionEvent e = run.Next(Clock::now() + kPoll);
    switch (e.kind) {
      case Kind::kText:
      case Kind::kIdle:
        choices[e.choice].text += e.text;
        // No write would tell: ask the kernel (peer_watch.h).
        if (client_gone()) run.Cancel();
        break;
      case Kind::kToolCall:
        AddToolCallPiece(e.tool, &choices[e.choice].tool_calls);
        if (client_gone()) run.Cancel();
        break;
      case Kind::kChoiceEnd: {
        const bool left = e.result.finish == backend::FinishReason::kCancelled && client_gone();
        LogChoice(run.model(), e.result, left, &res.log);
        if (left) return ClientClosed(res.log);
        if (!e.result.ok()) {
          HttpResponse fail = codec.Fail(*e.result.error);
          fail.log.model = res.log.model;
          return fail;
        }
        choices[e.choice].result = e.result;
        total += e.result.usage;
        break;
      }
      case Kind::kDone:
        res.body = Dump(codec.Collected(answer, choices, total));
        return res;
    }
  }
}

// Writes one streamed answer's frames as its events come.
void StreamEvents(StreamEncoder& enc, backend::Completion& run, const std::function<bool()>& client_gone,
                  const std::function<bool()>& stopping, const ChunkWriter& write, RequestLog* log) {
  // An empty frame writes nothing (but still asks whether the client left);
  // a failed write means the client is gone.
  auto send = [&](const std::string& frame) { return frame.empty() ? !client_gone() : write(frame); };
  if (!send(enc.Begin())) return Abandon(run, log);
  if (run.choices() > 0 && !send(enc.ChoiceStart(0))) return Abandon(run, log);
  backend::Usage total;
  for (;;) {
    if (stopping()) {
      run.Cancel();
      log->error = "cut short by the server's shutdown";
      write(enc.Failure(ShuttingDown()));
      return;
    }
    CompletionEvent e = run.Next(Clock::now() + kPoll);
    switch (e.kind) {
      case Kind::kText:
        if (!send(enc.Text(e.choice, e.text))) return Abandon(run, log);
        break;
      case Kind::kToolCall:
        if (!send(enc.ToolCall(e.choice, e.tool))) return Abandon(run, log);
        break;
      case Kind::kIdle:
        // Queued or prefilling: writes alone would not notice a closed peer.
        if (client_gone() || !write(std::string())) return Abandon(run, log);
        break;
      case Kind::kChoiceEnd:
        LogChoice(run.model(), e.result, /*client_left=*/false, log);
        if (!e.result.ok()) {
          write(enc.Failure(*e.result.error));  // never a clean end after a failure
          return;
        }
        if (!send(enc.ChoiceEnd(e.choice, e.result))) return;
        total += e.result.usage;
        if (e.choice + 1 < run.choices() && !send(enc.ChoiceStart(e.choice + 1))) return Abandon(run, log);
        break;
      case Kind::kDone:
        send(enc.End(total));
        return;
    }
  }
}

HttpResponse Stream(const GenerationCodec& codec, std::shared_ptr<backend::Completion> run,
                    std::shared_ptr<const Answer> answer, std::function<bool()> client_gone,
                    std::function<bool()> stopping) {
  HttpResponse res;
  res.content_type = codec.stream_content_type();
  res.headers = codec.stream_headers();
  std::shared_ptr<StreamEncoder> enc = codec.NewStream(*answer);
  res.stream = [enc, run, client_gone, stopping](const ChunkWriter& write, RequestLog* log) {
    // The HTTP library calls this outside its exception handler: nothing may escape.
    try {
      StreamEvents(*enc, *run, client_gone, stopping, write, log);
    } catch (const std::exception& e) {
      run->Cancel();
      log->error = std::string("internal error while streaming: ") + e.what();
      write(enc->Failure(MakeError(ErrorCode::kInternal, "internal error while streaming")));
    }
  };
  return res;
}

// The body as JSON, then as the codec's request.
template <class CodecT>
auto ParseRequest(const CodecT& codec, const std::string& text, json* body) -> decltype(codec.Parse(*body)) {
  auto j = ParseBody(text);
  if (!j) return j.error();
  *body = std::move(*j);
  return codec.Parse(*body);
}

}  // namespace

HttpResponse Driver::Generate(const GenerationCodec& codec, const HttpRequest& req) {
  json body;
  auto parsed = ParseRequest(codec, req.body, &body);
  if (!parsed) return codec.Fail(parsed.error());
  if (!req.may_pin && parsed->request.keep_alive_s && *parsed->request.keep_alive_s <= 0)
    return codec.Fail(MakeError(
        ErrorCode::kPermissionDenied,
        "keep_alive " + std::string(*parsed->request.keep_alive_s == 0 ? "0 (unload)" : "< 0 (pin)") +
            " needs an admin key (--admin-keys); send a duration, or none"));
  if (parsed->load_only) return LoadOnly(codec, parsed->request);
  parsed->request.cancelled = req.client_gone;
  parsed->request.tenant = req.tenant;
  parsed->request.routing.no_cache = req.no_cache;
  auto started = backend_.Start(parsed->request);
  if (!started) return codec.Fail(started.error());
  std::shared_ptr<backend::Completion> run = std::move(*started);
  auto answer = std::make_shared<Answer>();
  answer->id = codec.NewAnswerId();
  answer->created = UnixNow();
  answer->model = run->model();
  answer->load_seconds = run->load_seconds();
  answer->start = Clock::now();
  answer->include_usage = parsed->include_usage;
  answer->include_route = parsed->include_route;
  answer->echo = std::move(parsed->echo);
  const char* cache = run->cache_status();
  HttpResponse res =
      parsed->stream ? Stream(codec, std::move(run), std::move(answer), req.client_gone, req.server_stopping)
                     : Collect(codec, *run, *answer, req.client_gone, req.server_stopping);
  if (cache) res.headers["X-Hone-Cache"] = cache;
  return res;
}

HttpResponse Driver::LoadOnly(const GenerationCodec& codec, const backend::GenerationRequest& r) {
  auto loaded = backend_.Load(r.model, r.keep_alive_s);
  if (!loaded) return codec.Fail(loaded.error());
  HttpResponse res;
  res.log.model = loaded->model;
  res.body = Dump(codec.Loaded(loaded->model, r.keep_alive_s && *r.keep_alive_s == 0));
  return res;
}

HttpResponse Driver::Embed(const EmbeddingCodec& codec, const HttpRequest& req) {
  json body;
  auto parsed = ParseRequest(codec, req.body, &body);
  if (!parsed) return codec.Fail(parsed.error());
  const auto start = Clock::now();
  auto emb = backend_.Embed(*parsed, req.client_gone);
  HttpResponse res;
  if (!emb) {
    if (emb.error().code == ErrorCode::kAborted && req.client_gone()) return ClientClosed(res.log);
    return codec.Fail(emb.error());
  }
  res.log.model = emb->model;
  res.log.prompt_tokens = emb->prompt_tokens;
  res.body = Dump(codec.Encode(body, *emb, std::chrono::duration<double>(Clock::now() - start).count()));
  return res;
}

HttpResponse Driver::CountTokens(const GenerationCodec& codec, const HttpRequest& req) {
  auto body = ParseBody(req.body);
  if (!body) return codec.Fail(body.error());
  auto parsed = codec.ParsePrompt(*body);
  if (!parsed) return codec.Fail(parsed.error());
  parsed->cancelled = req.client_gone;
  parsed->tenant = req.tenant;
  auto tokens = backend_.CountPromptTokens(*parsed);
  if (!tokens) return codec.Fail(tokens.error());
  HttpResponse res;
  res.log.model = parsed->model;
  res.log.prompt_tokens = *tokens;
  res.body = Dump(codec.Counted(*tokens));
  return res;
}

HttpResponse Driver::ListModels(const ModelListCodec& codec) {
  HttpResponse res;
  res.body = Dump(codec.Encode(backend_.ListModels()));
  return res;
}

}  // namespace hone::api
