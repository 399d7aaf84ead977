// The upstream HTTP client: libcurl (TLS, HTTP/2, connection reuse, proxies
// from the environment). The thread that reads a call drives its transfer,
// so a routed request costs no hand-off to a client thread and back (two
// wake-ups, about 100 us on a small VM). A call is read as it arrives: its
// status, then body bytes with a deadline per read. Besides libcurl's connect
// and total timeouts it enforces a first-byte timeout (no body byte yet) and
// an idle timeout (no byte since the last), which an LLM stream needs.
// Cancelling a call (or dropping it) closes its connection at once, so the
// upstream sees the client leave and stops billing.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hone::route {

using Clock = std::chrono::steady_clock;

struct HttpSpec {
  std::string method = "POST";  // or "GET"
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  double connect_timeout_s = 5;
  double first_byte_timeout_s = 60;  // until the first body byte
  double idle_timeout_s = 30;        // between body bytes
  double total_timeout_s = 600;
  std::string ca_file;  // PEM to trust instead of the system's CAs
};

enum class TransportError { kNone, kConnect, kTimeout, kBroken, kCancelled };
const char* TransportErrorName(TransportError e);

class HttpCall {
 public:
  ~HttpCall() { Cancel(); }
  // The HTTP status once the headers are in; 0 if the call failed first (see
  // error()) or the deadline passed (then done() is false).
  int WaitStatus(Clock::time_point deadline);
  enum class Read { kData, kEnd, kIdle };
  // kData: *out holds the next bytes. kEnd: the body is over (error() says
  // whether it ended well). kIdle: the deadline passed with nothing new.
  Read Next(Clock::time_point deadline, std::string* out);
  // Everything left, until the end or the deadline.
  // At most max_bytes are kept; past them the call is cancelled (a hostile
  // or broken upstream must not fill the memory).
  std::string ReadAll(Clock::time_point deadline, size_t max_bytes = 64u << 20);
  void Cancel();
  bool done() const;
  TransportError error() const;
  std::string error_text() const;
  std::string Header(const std::string& lower_case_name) const;

  struct Impl;  // http_client.cc

 private:
  friend class HttpClient;
  std::shared_ptr<Impl> impl_;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();  // every call still in flight ends, cancelled, at its next read
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  // Starts the transfer on the caller's thread (on a kept-alive connection
  // the request is sent before it returns); the reader of the call drives
  // the rest: timeouts advance only while someone reads it.
  std::unique_ptr<HttpCall> Start(HttpSpec spec);

  struct Pool;  // kept-alive connections (http_client.cc)

 private:
  std::shared_ptr<Pool> pool_;
};

}  // namespace hone::route
