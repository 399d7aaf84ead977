#include "route/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>

namespace hone::route {
namespace {
TransportError FromCurl(int rc);
}  // namespace

const char* TransportErrorName(TransportError e) {
  switch (e) {
    case TransportError::kNone:
      return "none";
    case TransportError::kConnect:
      return "connect";
    case TransportError::kTimeout:
      return "timeout";
    case TransportError::kBroken:
      return "broken";
    case TransportError::kCancelled:
      return "cancelled";
  }
  return "?";
}

// Idle transfer handles: a multi handle with the connections its last calls
// left open, and the easy handle those calls used (reset between calls, so
// each call costs no easy-handle allocation, and libcurl keeps the buffers it
// grew). A call takes one pair for its life, so a worker that sends one
// request after another reuses its kept-alive connection, and no two threads
// ever drive one handle (libcurl does not share connections across threads).
struct HttpClient::Pool {
  struct Handles {
    CURLM* multi = nullptr;
    CURL* easy = nullptr;
  };
  std::atomic<bool> stopping{false};  // the client is gone
  std::mutex mu;
  std::vector<Handles> idle;  // GUARDED_BY(mu): most recently used last

  // A pair, or a null multi when libcurl could not make one.
  Handles Take() {
    Handles reused;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        reused = idle.back();
        idle.pop_back();
      }
    }
    if (reused.easy) {
      curl_easy_reset(reused.easy);  // every option back to its default; connections stay in the multi
      return reused;
    }
    Handles h;
    h.multi = curl_multi_init();
    h.easy = h.multi ? curl_easy_init() : nullptr;
    if (!h.easy) {
      if (h.multi) curl_multi_cleanup(h.multi);
      return {};
    }
    // Room for connections to a few upstreams (a route may name several).
    curl_multi_setopt(h.multi, CURLMOPT_MAXCONNECTS, 8L);
    return h;
  }
  // Takes back a pair whose easy handle is no longer in its multi.
  void Give(Handles h) {
    {
      std::lock_guard<std::mutex> lock(mu);
      // A bound on idle sockets nobody drives (a closed one is found on reuse).
      if (!stopping.load() && idle.size() < 64) {
        idle.push_back(h);
        return;
      }
    }
    Close(h);  // outside the lock: closing TLS connections takes time
  }
  static void Close(Handles h) {
    curl_easy_cleanup(h.easy);
    curl_multi_cleanup(h.multi);
  }
  ~Pool() {
    for (Handles h : idle) Close(h);
  }
};

// One call. The thread that reads it drives its transfer (Pump), so a
// request costs no hand-off to another thread and back.
struct HttpCall::Impl {
  HttpSpec spec;
  std::shared_ptr<HttpClient::Pool> pool;
  std::atomic<bool> cancelled{false};
  // Serializes pumping: one reader at a time drives the transfer.
  mutable std::mutex mu;
  // GUARDED_BY(mu): the fields below. The callbacks run inside Pump, which
  // holds mu.
  int status = 0;
  bool headers_done = false;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string pending;                         // body bytes not read yet
  bool done = false;
  TransportError error = TransportError::kNone;
  std::string error_text;
  CURLM* multi = nullptr;  // null once the transfer is over
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  Clock::time_point started, last_byte, idle_from;
  bool got_body = false;
  bool handed_data = false;  // the last read returned bytes

  ~Impl() {
    std::lock_guard<std::mutex> lock(mu);
    Finish(TransportError::kCancelled, "cancelled by the client");
  }

  // Ends the call and gives the multi handle back. A transfer removed before
  // its end closes its connection, so the upstream sees the client leave.
  void Finish(TransportError e, std::string text) {
    if (multi) {
      curl_multi_remove_handle(multi, easy);
      curl_slist_free_all(header_list);
      pool->Give({multi, easy});
      multi = nullptr;
      easy = nullptr;
      header_list = nullptr;
    }
    if (done) return;
    done = true;
    headers_done = true;
    error = e;
    error_text = std::move(text);
  }

  // Drives the transfer until ready() holds, the call ends, or the deadline.
  template <typename Ready>
  void Pump(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Ready ready);
};

namespace {

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

template <typename Ready>
void HttpCall::Impl::Pump(std::unique_lock<std::mutex>&, Clock::time_point deadline, Ready ready) {
  // The time a reader spends elsewhere after taking bytes (writing them to a
  // slow client) is not the upstream's idleness: bytes sent meanwhile wait
  // in the socket. Reads that found nothing do count, however short each.
  if (handed_data) {
    idle_from = Clock::now();
    handed_data = false;
  }
  for (;;) {
    if (ready() || done) return;
    if (pool->stopping.load()) return Finish(TransportError::kCancelled, "client shut down");
    if (cancelled.load()) return Finish(TransportError::kCancelled, "cancelled by the client");
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      const CURLcode rc = m->data.result;
      return Finish(cancelled.load() ? TransportError::kCancelled : FromCurl(rc),
                    rc == CURLE_OK ? "" : curl_easy_strerror(rc));
    }
    if (ready()) return;
    const auto now = Clock::now();
    if (!got_body && Secs(now - started) > spec.first_byte_timeout_s)
      return Finish(TransportError::kTimeout,
                    "no response byte within " + std::to_string(static_cast<int>(spec.first_byte_timeout_s)) + " s");
    if (got_body && Secs(now - std::max(last_byte, idle_from)) > spec.idle_timeout_s)
      return Finish(TransportError::kTimeout,
                    "stream idle for over " + std::to_string(static_cast<int>(spec.idle_timeout_s)) + " s");
    if (now >= deadline) return;
    // In slices: a cancel from another thread and the timeouts above are
    // looked at again within 50 ms.
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(std::min<int64_t>(wait, 50)), nullptr);
  }
}

int HttpCall::WaitStatus(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->Pump(lock, deadline, [&] { return impl_->headers_done; });
  return impl_->headers_done ? impl_->status : 0;
}

HttpCall::Read HttpCall::Next(Clock::time_point deadline, std::string* out) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->Pump(lock, deadline, [&] { return !impl_->pending.empty(); });
  if (!impl_->pending.empty()) {
    out->swap(impl_->pending);
    impl_->pending.clear();
    impl_->handed_data = true;
    return Read::kData;
  }
  return impl_->done ? Read::kEnd : Read::kIdle;
}

std::string HttpCall::ReadAll(Clock::time_point deadline, size_t max_bytes) {
  std::string all, piece;
  for (;;) {
    Read r = Next(deadline, &piece);
    if (r != Read::kData) break;
    all += piece;
    piece.clear();
    if (all.size() > max_bytes) {
      Cancel();
      all.resize(max_bytes);
      break;
    }
  }
  return all;
}

void HttpCall::Cancel() {
  if (!impl_) return;
  impl_->cancelled.store(true);
  // Close the connection now, unless another thread is pumping the call:
  // that one sees the flag within its 50 ms slice.
  std::unique_lock<std::mutex> lock(impl_->mu, std::try_to_lock);
  if (lock.owns_lock()) impl_->Finish(TransportError::kCancelled, "cancelled by the client");
}

bool HttpCall::done() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->done;
}

TransportError HttpCall::error() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

std::string HttpCall::error_text() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error_text;
}

std::string HttpCall::Header(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->headers.find(name);
  return it == impl_->headers.end() ? "" : it->second;
}

namespace {

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<HttpCall::Impl*>(user);
  if (c->cancelled.load()) return 0;  // aborts the transfer
  c->got_body = true;
  c->last_byte = Clock::now();
  c->pending.append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<HttpCall::Impl*>(user);
  std::string line(data, size * n);
  c->last_byte = Clock::now();
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a status line (again after a 100 Continue)
    size_t sp = line.find(' ');
    c->status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
    c->headers.clear();
    c->headers_done = false;
  } else if (line.empty()) {
    if (c->status >= 200) c->headers_done = true;
  } else if (size_t colon = line.find(':'); colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    c->headers[name] = value;
  }
  return size * n;
}

TransportError FromCurl(int code) {
  switch (static_cast<CURLcode>(code)) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::kTimeout;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return TransportError::kConnect;
    default:
      return TransportError::kBroken;
  }
}

}  // namespace

HttpClient::HttpClient() : pool_(std::make_shared<Pool>()) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() { pool_->stopping.store(true); }

std::unique_ptr<HttpCall> HttpClient::Start(HttpSpec spec) {
  auto c = std::make_shared<HttpCall::Impl>();
  c->spec = std::move(spec);
  c->pool = pool_;
  c->started = c->last_byte = Clock::now();
  const HttpClient::Pool::Handles h = pool_->Take();
  if (!h.multi) {
    std::lock_guard<std::mutex> lock(c->mu);
    c->Finish(TransportError::kConnect, "libcurl could not make a transfer handle");
    auto call = std::unique_ptr<HttpCall>(new HttpCall());
    call->impl_ = std::move(c);
    return call;
  }
  CURL* e = h.easy;
  c->easy = e;
  const HttpSpec& s = c->spec;
  curl_easy_setopt(e, CURLOPT_URL, s.url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(s.connect_timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(s.total_timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, c.get());
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  // Behind a proxy, "HTTP/1.1 200 Connection established" and its blank
  // line are not the upstream's answer.
  curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  // No Accept-Encoding: a server that gzips a token stream holds tokens
  // back in its compressor, which costs the client its time to first token.
  if (!s.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, s.ca_file.c_str());
  if (s.method == "POST") {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(s.body.size()));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, s.body.data());  // the spec outlives the transfer
  }
  for (const std::string& hd : s.headers) c->header_list = curl_slist_append(c->header_list, hd.c_str());
  // No "Expect: 100-continue" round trip before a large body.
  c->header_list = curl_slist_append(c->header_list, "Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->header_list);
  c->multi = h.multi;
  curl_multi_add_handle(c->multi, e);
  {
    // The transfer starts now, on the caller's thread (a kept-alive
    // connection: the request is sent; a new one: the connect begins).
    std::unique_lock<std::mutex> lock(c->mu);
    c->Pump(lock, Clock::now(), [] { return false; });
  }
  auto call = std::unique_ptr<HttpCall>(new HttpCall());
  call->impl_ = std::move(c);
  return call;
}

}  // namespace hone::route
