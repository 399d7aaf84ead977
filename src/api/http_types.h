// The server's own view of HTTP, so that only http_server.cc sees cpp-httplib:
// handlers (the driver, api/driver.h, and a few endpoints of their own) take
// an HttpRequest and return an HttpResponse, whose body is either a string or
// a stream function that writes chunks until done.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace hone::api {

struct HttpRequest {
  std::string method;
  std::string path;
  std::string body;
  std::string id;  // request id, echoed as X-Request-Id and logged
  // The client key's fingerprint ("key-1a2b3c4d") on a server with keys, else
  // empty: budgets and the response cache are kept per tenant.
  std::string tenant;
  bool no_cache = false;  // Cache-Control: no-cache / no-store, or X-Hone-Cache: bypass
  // False for a client key on a server with admin keys: its keep_alive may
  // not pin a model (< 0) or unload it (0); those are the admin's.
  bool may_pin = true;
  // True once the client has disconnected (its socket shows a FIN or RST),
  // and once the answer is written; never null.
  std::function<bool()> client_gone = [] { return false; };
  // True once the server's drain deadline has passed: what still runs ends
  // now, with an explicit error (HttpServer::Drain); never null.
  std::function<bool()> server_stopping = [] { return false; };
};

// Writes one chunk; returns false once the client has gone away.
using ChunkWriter = std::function<bool(const std::string& chunk)>;

// What the per-request log line reports beyond method, path and status.
struct RequestLog {
  std::string model;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int draft_tokens = 0, accepted_tokens = 0;  // speculative decoding (--spec)
  double ttft_ms = -1;
  double queue_ms = -1;
  std::string finish;
  std::string error;
  std::string route;  // the router's note: route, target, attempts, overflow reason
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;
  // When set, the body is streamed: called once, writes chunks, returns when done.
  std::function<void(const ChunkWriter&, RequestLog*)> stream;
  RequestLog log;
};

}  // namespace hone::api
