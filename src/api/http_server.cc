#include "api/http_server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "api/admin_api.h"
#include "api/anthropic_codec.h"
#include "api/connection_gate.h"
#include "api/console.h"
#include "api/errors.h"
#include "api/gated_server.h"
#include "api/http_sockets.h"
#include "api/json_fields.h"
#include "api/ollama_codec.h"
#include "api/ollama_local.h"
#include "api/openai_codec.h"
#include "api/origin_check.h"
#include "api/request_auth.h"
#include "api/request_deadline.h"
#include "api/responses_codec.h"

namespace hone::api {
namespace {

using Clock = backend::Clock;

// httplib runs routing, the (streamed) response and the logger for one request
// on one worker thread, so per-request state can live in a thread-local.
struct RequestState {
  std::string id;  // empty until the request is seen; cleared once logged
  Caller caller;   // who Guard found it to be
  Clock::time_point start;
  RequestLog log;
  std::string method, path;
  int status = 0;
  bool quiet = false;     // --quiet: no log lines
  bool streamed = false;  // a stream logs itself when it ends
  bool closing = false;   // CloseAfterwards took the answer's body
};
thread_local RequestState t_req;

void BeginRequest(const std::string& method, const std::string& path, bool quiet) {
  t_req =
      RequestState{NewId("req"), Caller{}, Clock::now(), RequestLog(), method, path, 0, quiet, false, false};
}

// One JSON line per request (never headers, so never keys).
void WriteLogLine() {
  RequestDeadlines::AnswerWritten();  // the connection's next request is due from now
  if (t_req.id.empty()) return;
  const std::string id = std::exchange(t_req.id, "");
  if (t_req.quiet) return;
  const RequestLog& l = t_req.log;
  nlohmann::json j = {{"id", id},
                      {"method", t_req.method},
                      {"path", t_req.path},
                      {"status", t_req.status},
                      {"ms", std::chrono::duration<double, std::milli>(Clock::now() - t_req.start).count()}};
  if (!l.model.empty()) j["model"] = l.model;
  if (l.prompt_tokens) j["prompt_tokens"] = l.prompt_tokens;
  if (l.completion_tokens) j["completion_tokens"] = l.completion_tokens;
  if (l.draft_tokens) {  // speculative decoding: how many drafts the answer kept
    j["draft_tokens"] = l.draft_tokens;
    j["accepted_tokens"] = l.accepted_tokens;
  }
  if (l.ttft_ms >= 0) j["ttft_ms"] = l.ttft_ms;
  if (!l.route.empty()) j["route"] = l.route;
  if (l.queue_ms >= 0) j["queue_ms"] = l.queue_ms;
  if (!l.finish.empty()) j["finish"] = l.finish;
  if (!l.error.empty()) j["error"] = l.error;
  std::fprintf(stderr, "%s\n", Dump(j).c_str());
}

// httplib 0.54 calls its logger before a streamed body is written, so a
// stream writes its line when its provider is destroyed: after its last
// chunk, or unsent when the client left before the headers.
struct LogWhenDone {
  ~LogWhenDone() { WriteLogLine(); }
};

// One codec per endpoint, for the server's whole life (streams refer to them).
const openai::GenerationCodec kOpenAiChat(/*chat=*/true);
const openai::GenerationCodec kOpenAiCompletions(/*chat=*/false);
const openai::EmbeddingCodec kOpenAiEmbeddings;
const openai::ModelListCodec kOpenAiModels;
const ollama::GenerationCodec kOllamaChat(/*chat=*/true);
const responses::ResponsesCodec kOpenAiResponses;
const anthropic::MessagesCodec kAnthropicMessages;
const ollama::GenerationCodec kOllamaGenerate(/*chat=*/false);
const ollama::EmbeddingCodec kOllamaEmbed(/*legacy=*/false);
const ollama::EmbeddingCodec kOllamaLegacyEmbeddings(/*legacy=*/true);
const ollama::ModelListCodec kOllamaTags;

ApiFlavor FlavorOf(const std::string& path) {
  if (path.rfind("/api/", 0) == 0) return ApiFlavor::kOllama;
  if (path.rfind("/v1/messages", 0) == 0) return ApiFlavor::kAnthropic;
  return ApiFlavor::kOpenAI;
}

void Apply(HttpResponse out, httplib::Response& res) {
  res.status = out.status;
  for (const auto& [k, v] : out.headers) res.set_header(k, v);
  res.set_header("X-Request-Id", t_req.id);
  t_req.log = out.log;
  t_req.status = out.status;
  if (!out.stream) {
    t_req.streamed = false;
    res.set_content(out.body, out.content_type);
    return;
  }
  t_req.streamed = true;
  auto stream = std::move(out.stream);
  auto logged = std::make_shared<LogWhenDone>();
  res.set_chunked_content_provider(out.content_type, [stream, logged](size_t, httplib::DataSink& sink) {
    ChunkWriter write = [&sink](const std::string& chunk) {
      if (chunk.empty()) return sink.is_writable();
      return sink.write(chunk.data(), chunk.size());
    };
    stream(write, &t_req.log);
    sink.done();
    return true;
  });
}

// Does the request carry a body nobody has read? httplib's own flag
// (body_consumed_, a public member of the vendored 0.54's Request, set once
// the body is read; httplib checks it to drain a kept-alive connection) and
// the framing headers.
bool BodyLeftUnread(const httplib::Request& req) {
  if (req.body_consumed_) return false;
  return req.get_header_value_u64("Content-Length") > 0 || req.has_header("Transfer-Encoding");
}

// The connection closes after this answer, even when httplib would keep it
// (a refusal past the connection bound or during a drain says "Connection:
// close" with a status below 400 in no case, but keep it explicit): the body
// goes out through a provider that reports failure once it has written
// everything, so the worker gives the connection back to be closed. The gate
// then lingers over what the client still sends (a body refused unread), as
// nginx's lingering_close, so the client reads this answer instead of a reset.
void CloseAfterwards(const httplib::Request&, httplib::Response& res) {
  auto body = std::make_shared<std::string>(std::move(res.body));
  const std::string type = res.get_header_value("Content-Type");
  res.body.clear();
  res.headers.erase("Content-Type");  // set_content_provider adds it again
  t_req.closing = true;
  res.set_content_provider(body->size(), type, [body](size_t offset, size_t, httplib::DataSink& sink) {
    sink.write(body->data() + offset, body->size() - offset);
    return false;
  });
}

// Has the client gone away? httplib's check peeks at the socket (a FIN or
// RST shows), two syscalls; once gone, a client stays gone. The scheduler or
// a router thread may ask after the answer is written, when the socket may
// already be closed and its number reused: by then the answer is "gone".
// GUARDED_BY: atomics, read from the HTTP worker and the backend's threads.
struct ClientWatch {
  explicit ClientWatch(std::function<bool()> closed) : is_closed(std::move(closed)) {}
  bool Gone() {
    if (over.load() || gone.load()) return true;
    // Asked per token of a non-streamed answer: look at the socket at most
    // every 20 ms, not a syscall per token.
    const int64_t now = Clock::now().time_since_epoch().count();
    if (now < next_look.load()) return false;
    next_look.store(now + std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(20)).count());
    if (is_closed()) gone.store(true);
    return gone.load();
  }
  const std::function<bool()> is_closed;  // httplib's, bound to the socket
  std::atomic<int64_t> next_look{0};      // Clock ticks
  std::atomic<bool> gone{false};
  std::atomic<bool> over{false};  // the handler and its stream are done
};

// Connections the gate keeps open at once: the open-files limit (raised to
// its hard limit at start, util/open_files.h), less a reserve for model and
// cache files, upstream sockets and the probe port.
int OpenConnectionsBound() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return 0;
  const auto soft = static_cast<int64_t>(std::min<rlim_t>(l.rlim_cur, 1 << 30));
  return static_cast<int>(soft > 2048 ? soft - 512 : soft / 2);
}

bool IsProbePath(const std::string& path) {
  return path == "/health" || path == "/livez" || path == "/metrics";
}

OriginPolicy OriginsOf(const HttpConfig& c) {
  OriginPolicy o;
  o.loopback_bind = IsLoopbackName(HostName(c.host));
  o.allowed_hosts = SplitComma(c.allowed_hosts);
  o.allowed_origins = SplitComma(c.allowed_origins);
  if (!c.cors_origin.empty()) o.allowed_origins.push_back(c.cors_origin);
  return o;
}

RequestHead HeadOf(const httplib::Request& req) {
  RequestHead h;
  h.method = req.method;
  h.path = req.path;
  h.host = req.get_header_value("Host");
  h.origin = req.get_header_value("Origin");
  h.has_origin = req.has_header("Origin");
  h.content_type = req.get_header_value("Content-Type");
  h.authorization = req.get_header_value("Authorization");
  h.x_api_key = req.get_header_value("x-api-key");
  return h;
}

}  // namespace

HttpServer::HttpServer(const HttpConfig& config, std::vector<std::string> api_keys, uint64_t max_body,
                       backend::Backend& backend, backend::ModelAdmin& admin, serve::Metrics& metrics,
                       int warm_workers)
    : config_(config),
      warm_workers_(warm_workers),
      auth_(std::move(api_keys), OriginsOf(config)),
      max_body_(max_body),
      driver_(backend),
      backend_(backend),
      admin_(admin),
      metrics_(metrics),
      deadlines_(std::make_unique<RequestDeadlines>(config.header_timeout, config.body_timeout)),
      probe_deadlines_(config.probe_port >= 0 ? std::make_unique<RequestDeadlines>(2, 2) : nullptr),
      http_(std::make_unique<GatedServer>()),
      probe_http_(config.probe_port >= 0 ? std::make_unique<httplib::Server>() : nullptr) {
  ConnectionGate::Options gate;
  gate.header_timeout_s = config_.header_timeout;
  gate.body_timeout_s = config_.body_timeout;
  gate.read_timeout_s = config_.read_timeout;
  gate.max_per_client = config_.max_connections_per_client;
  gate.defer_accept_s = config_.defer_accept;
  gate.max_open = OpenConnectionsBound();
  gate.limits.max_body = max_body_ > 0 ? max_body_ : (64u << 20);
  gate_ = std::make_unique<ConnectionGate>(gate, [this](std::unique_ptr<GateConn>& conn) {
    GateConn* raw = conn.get();
    // The job owns the connection from here (it may run before enqueue returns).
    try {
      if (!workers_->enqueue([this, raw] { ServeOnWorker(raw); })) return false;
    } catch (const std::system_error&) {
      // The job was queued, but no new thread could be made: a running
      // worker will take it.
    }
    conn.release();
    return true;
  });
  auth_.SetConsole(config_.ui);
  http_->set_payload_max_length(max_body_);
  // Only for the Keep-Alive header httplib writes: the gate closes an idle
  // connection after 5 s and counts no requests (a gateway in front would
  // otherwise reconnect every 100th).
  http_->set_keep_alive_timeout(5);
  http_->set_keep_alive_max_count(100000);
  Routes();
  if (probe_http_) ProbeRoutes();
}

HttpServer::~HttpServer() {
  // Workers first: each gives its connection back to the gate (which closes
  // it once stopped), and reads deadlines_.
  if (gate_) gate_->Stop();
  if (workers_) workers_->shutdown();
  if (probe_http_) probe_http_->stop();
  if (probe_thread_.joinable()) probe_thread_.join();
}

// Before routing: CORS, the connection bound, the drain, the browser rules,
// the declared body size, then the key. A refusal is answered here.
bool HttpServer::Guard(const httplib::Request& req, httplib::Response& res) {
  RequestDeadlines::HeadersRead();
  BeginRequest(req.method, req.path, config_.quiet);
  if (!config_.cors_origin.empty()) {
    res.set_header("Access-Control-Allow-Origin", config_.cors_origin);
    res.set_header("Access-Control-Allow-Headers",
                   AllowedCorsHeaders(req.get_header_value("Access-Control-Request-Headers")));
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    if (req.method == "OPTIONS") {
      res.status = 204;
      return true;
    }
  }
  if (req.path == "/health" || req.path == "/livez") return false;
  // `close`: the connection closes after the answer, so the worker returns
  // to the reserve.
  auto refuse = [&](const HttpError& e, bool close) {
    Apply(ErrorResponse(e, FlavorOf(req.path)), res);
    if (close) CloseAfterwards(req, res);
    return true;
  };
  // This connection is one of those counted: past the bound, refuse at once.
  if (!IsProbePath(req.path) && connections_.load() > config_.max_connections)
    return refuse(Overloaded(config_.max_connections), true);
  if (draining_.load()) return refuse(Draining(), true);
  const RequestHead head = HeadOf(req);
  if (auto e = auth_.CheckBrowser(head)) return refuse(*e, false);
  // A declared body over --max-body is refused before a byte of it is
  // read (httplib would read up to the limit first); the client then gets
  // the answer while the error handler lingers over what it still sends.
  if (max_body_ > 0 && req.get_header_value_u64("Content-Length") > max_body_)
    return refuse(ProtocolError(413, req.method, req.path, config_.max_body), false);
  t_req.caller = auth_.Identify(head);
  if (auto e = auth_.CheckKey(head, t_req.caller)) return refuse(*e, false);
  return false;
}

// Errors httplib produces itself (413 body too large, 404 no route, ...) get
// our envelope. Requests refused while their headers were read (400, 414,
// 415) never reached Guard: they get an id of their own here.
void HttpServer::OnHttpError(const httplib::Request& req, httplib::Response& res) {
  const bool whole = !t_req.id.empty();  // Guard saw its headers
  if (!whole) BeginRequest(req.method, req.path, config_.quiet);
  if (t_req.closing) return;  // CloseAfterwards holds the answer
  if (res.body.empty()) {
    const int status = res.status;
    Apply(ErrorResponse(ProtocolError(status, req.method, req.path, config_.max_body), FlavorOf(req.path)),
          res);
    res.status = status;
  }
  // Answered before its body was read: linger, so the client reads this
  // answer. Not for a request whose headers were never whole (a 300 MiB
  // header): there is nothing to drain but more of the same.
  if (whole && BodyLeftUnread(req)) CloseAfterwards(req, res);
}

// An endpoint's handler over the neutral HttpRequest: the caller Guard
// identified, the client watch, the drain's cut-off and the in-flight count.
std::function<void(const httplib::Request&, httplib::Response&)> HttpServer::Wrap(Endpoint fn) {
  return [this, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    RequestDeadlines::RequestRead();  // the body is in; the answer may take its time
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    r.body = req.body;
    r.id = t_req.id;
    r.tenant = t_req.caller.tenant;
    r.may_pin = auth_.MayPin(t_req.caller);
    const std::string cache_control = req.get_header_value("Cache-Control");
    r.no_cache = cache_control.find("no-cache") != std::string::npos ||
                 cache_control.find("no-store") != std::string::npos ||
                 req.get_header_value("X-Hone-Cache") == "bypass";
    auto watch = std::make_shared<ClientWatch>(req.is_connection_closed);
    r.client_gone = [watch] { return watch->Gone(); };
    r.server_stopping = [this] { return cut_off_.load(); };
    // In flight until the answer is written: a stream, until its writer ends.
    auto counted = std::make_shared<InFlight>(&in_flight_);
    HttpResponse out = fn(r);
    if (out.stream) {
      out.stream = [counted, watch, stream = std::move(out.stream)](const ChunkWriter& w, RequestLog* log) {
        stream(w, log);
        watch->over.store(true);
      };
    } else {
      watch->over.store(true);
    }
    Apply(std::move(out), res);
  };
}

void HttpServer::Routes() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Guard(req, res) ? httplib::Server::HandlerResponse::Handled
                           : httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) { OnHttpError(req, res); });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    Apply(ErrorResponse(HttpError{500, "internal error", "server_error", ""}, FlavorOf(req.path)), res);
  });
  s.set_logger([](const httplib::Request&, const httplib::Response& res) {
    if (t_req.streamed) return;  // LogWhenDone writes it
    t_req.status = res.status;
    WriteLogLine();
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
  s.Get("/livez", [this](const httplib::Request&, httplib::Response& res) { Live(res); });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { WriteMetrics(res); });
  ApiRoutes();
  AdminRoutes();
  if (config_.ui)
    s.Get(R"(/ui(/[A-Za-z0-9._-]*)?)", Wrap([](const HttpRequest& r) { return ConsoleFile(r.path); }));
}

void HttpServer::ApiRoutes() {
  httplib::Server& s = *http_;
  Driver& d = driver_;
  auto generate = [&](const GenerationCodec& c) {
    return Wrap([&d, &c](const HttpRequest& r) { return d.Generate(c, r); });
  };
  auto embed = [&](const EmbeddingCodec& c) {
    return Wrap([&d, &c](const HttpRequest& r) { return d.Embed(c, r); });
  };
  auto list = [&](const ModelListCodec& c) {
    return Wrap([&d, &c](const HttpRequest&) { return d.ListModels(c); });
  };
  s.Get("/v1/models", list(kOpenAiModels));
  s.Post("/v1/chat/completions", generate(kOpenAiChat));
  s.Post("/v1/completions", generate(kOpenAiCompletions));
  s.Post("/v1/responses", generate(kOpenAiResponses));
  s.Post("/v1/messages", generate(kAnthropicMessages));
  s.Post("/v1/messages/count_tokens",
         Wrap([&d](const HttpRequest& r) { return d.CountTokens(kAnthropicMessages, r); }));
  s.Post("/v1/embeddings", embed(kOpenAiEmbeddings));
  s.Get("/api/tags", list(kOllamaTags));
  s.Post("/api/generate", generate(kOllamaGenerate));
  s.Post("/api/chat", generate(kOllamaChat));
  s.Post("/api/embed", embed(kOllamaEmbed));
  s.Post("/api/embeddings", embed(kOllamaLegacyEmbeddings));
  backend::ModelAdmin& admin = admin_;
  s.Get("/api/ps", Wrap([&admin](const HttpRequest&) { return ollama::Ps(admin); }));
  s.Get("/api/version", Wrap([](const HttpRequest&) { return ollama::Version(); }));
  s.Post("/api/show", Wrap([&admin](const HttpRequest& r) { return ollama::Show(admin, r); }));
}

// hone's own endpoints: the router's views and canary commands, residency
// controls ({"model": NAME, "pin": bool?, "keep_alive": ...}), the rendered
// prompt and the prompt cache (admin_api.h).
void HttpServer::AdminRoutes() {
  httplib::Server& s = *http_;
  backend::ModelAdmin& admin = admin_;
  backend::Backend& backend = backend_;
  s.Get("/hone/routes", Wrap([this](const HttpRequest&) { return HoneRoutes(routes_json_); }));
  s.Get("/hone/spend", Wrap([this](const HttpRequest&) { return HoneSpend(spend_json_); }));
  s.Post("/hone/routes/canary",
         Wrap([this](const HttpRequest& r) { return HoneCanary(canary_control_, r); }));
  s.Post("/hone/load",
         Wrap([&backend, &admin](const HttpRequest& r) { return HoneLoad(backend, admin, r); }));
  s.Post("/hone/unload", Wrap([&admin](const HttpRequest& r) { return HoneUnload(admin, r); }));
  s.Post("/hone/render", Wrap([&admin](const HttpRequest& r) { return HoneRender(admin, kOpenAiChat, r); }));
  s.Get("/hone/cache", Wrap([&admin](const HttpRequest& r) { return HoneCacheList(admin, r); }));
  s.Delete("/hone/cache", Wrap([&admin](const HttpRequest& r) { return HoneCacheClear(admin, r); }));
}

Result<int> HttpServer::Bind() {
  // A burst of connects must not overflow the accept queue (the kernel would
  // drop handshakes, retried by clients after a second): the kernel caps the
  // backlog at net.core.somaxconn.
  auto port = gate_->Listen(config_.host, config_.port, 65535);
  if (!port) {
    return MakeError(ErrorCode::kIo, "cannot listen on " + config_.host + ":" + std::to_string(config_.port) +
                                         " (" + port.error().message +
                                         "; in use, or not an address of this machine)");
  }
  port_ = *port;
  http_->SetOpen(gate_->listen_fd());
  if (probe_http_) {
    int probe = config_.probe_port == 0 ? probe_http_->bind_to_any_port(config_.host) : config_.probe_port;
    if (config_.probe_port != 0 && !probe_http_->bind_to_port(config_.host, config_.probe_port)) probe = -1;
    if (probe <= 0) {
      return MakeError(ErrorCode::kIo, "cannot listen on " + config_.host + ":" +
                                           std::to_string(config_.probe_port) +
                                           " for --probe-port (in use?)");
    }
    probe_port_ = probe;
    WidenBacklog(probe_listen_fd_, 1024);  // probes come one per connection
    // Probes answer from the moment the ports are bound: /health says
    // "starting" (503) while models load, /livez 200.
    probe_thread_ = std::thread([this] { probe_http_->listen_after_bind(); });
  }
  return *port;
}

// Requests on a worker: warm threads for the slots and the router's upstream
// streams (AddWorkers), growing on demand to --max-connections plus a
// reserve: past the bound, API requests get 503 at once while /health and
// /metrics still find a worker. Waiting connections hold none (the gate).
void HttpServer::Run() {
  const size_t warm = std::max(32, warm_workers_) + extra_workers_.load();
  const size_t most = std::max<size_t>(warm, config_.max_connections + kProbeReserve);
  workers_ = std::make_unique<httplib::ThreadPool>(std::min(warm, most), most, /*max_queued=*/most);
  gate_->Run();
}

void HttpServer::ServeOnWorker(GateConn* raw) {
  std::unique_ptr<GateConn> conn(raw);
  connections_.fetch_add(1);
  // The headers are in; a body still coming (one too large for the gate to
  // hold) has --body-timeout from their end, kept by the watchdog.
  // (A header block too large for the gate is handed over unfinished: its
  // --header-timeout counts from the request's start.)
  const bool headers_in = conn->headers_done_ns != 0;
  deadlines_->Open({conn->fd, headers_in ? conn->headers_done_ns : conn->request_since_ns}, headers_in);
  const bool keep = http_->ServeOne(*conn, config_.read_timeout, /*write_timeout_s=*/60);
  deadlines_->Close();
  connections_.fetch_sub(1);
  gate_->Return(std::move(conn), keep);
}

void HttpServer::Stop() {
  http_->SetClosed();  // streams in flight end
  gate_->Stop();
  if (probe_http_) probe_http_->stop();
}

int HttpServer::Drain(double timeout_s) {
  draining_.store(true);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (in_flight_.load() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int left = in_flight_.load();
  if (left > 0) {
    cut_off_.store(true);  // each ends within a poll (100 ms) with an error frame
    const auto grace = Clock::now() + std::chrono::seconds(5);
    while (in_flight_.load() > 0 && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Stop();
  return left;
}

}  // namespace hone::api
