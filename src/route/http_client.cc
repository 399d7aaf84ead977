#include "route/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>

namespace hone::route {

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

// Shared between the caller and the client's thread.
struct HttpCall::Impl {
  HttpSpec spec;
  std::atomic<bool> cancelled{false};
  mutable std::mutex mu;
  std::condition_variable cv;
  // GUARDED_BY(mu): the fields below.
  int status = 0;
  bool headers_done = false;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string pending;                         // body bytes not read yet
  bool done = false;
  TransportError error = TransportError::kNone;
  std::string error_text;
  // Loop thread only.
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  Clock::time_point started, last_byte;
  bool got_body = false;
  std::string header_line;

  void Finish(TransportError e, std::string text) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    done = true;
    headers_done = true;
    error = e;
    error_text = std::move(text);
    cv.notify_all();
  }
};

int HttpCall::WaitStatus(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_until(lock, deadline, [&] { return impl_->headers_done; });
  return impl_->headers_done ? impl_->status : 0;
}

HttpCall::Read HttpCall::Next(Clock::time_point deadline, std::string* out) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_until(lock, deadline, [&] { return !impl_->pending.empty() || impl_->done; });
  if (!impl_->pending.empty()) {
    out->swap(impl_->pending);
    impl_->pending.clear();
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
  if (impl_) impl_->cancelled.store(true);
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
  std::lock_guard<std::mutex> lock(c->mu);
  c->pending.append(data, size * n);
  c->cv.notify_all();
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* c = static_cast<HttpCall::Impl*>(user);
  std::string line(data, size * n);
  c->last_byte = Clock::now();
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  std::lock_guard<std::mutex> lock(c->mu);
  if (line.rfind("HTTP/", 0) == 0) {  // a status line (again after a 100 Continue)
    size_t sp = line.find(' ');
    c->status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
    c->headers.clear();
    c->headers_done = false;
  } else if (line.empty()) {
    if (c->status >= 200) {
      c->headers_done = true;
      c->cv.notify_all();
    }
  } else if (size_t colon = line.find(':'); colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    c->headers[name] = value;
  }
  return size * n;
}

TransportError FromCurl(CURLcode rc) {
  switch (rc) {
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

struct HttpClient::Loop {
  CURLM* multi = nullptr;
  std::thread thread;
  std::mutex mu;
  std::deque<std::shared_ptr<HttpCall::Impl>> incoming;  // GUARDED_BY(mu)
  bool stopping = false;                                 // GUARDED_BY(mu)
  std::vector<std::shared_ptr<HttpCall::Impl>> active;   // loop thread only

  void Add(const std::shared_ptr<HttpCall::Impl>& c) {
    CURL* e = curl_easy_init();
    c->easy = e;
    c->started = c->last_byte = Clock::now();
    const HttpSpec& s = c->spec;
    curl_easy_setopt(e, CURLOPT_URL, s.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, c.get());
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
    for (const std::string& h : s.headers) c->header_list = curl_slist_append(c->header_list, h.c_str());
    // No "Expect: 100-continue" round trip before a large body.
    c->header_list = curl_slist_append(c->header_list, "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->header_list);
    curl_multi_add_handle(multi, e);
    active.push_back(c);
  }

  void Remove(const std::shared_ptr<HttpCall::Impl>& c) {
    curl_multi_remove_handle(multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->header_list);
    c->easy = nullptr;
    c->header_list = nullptr;
  }

  // Timeouts libcurl does not have, and cancellations.
  void Police() {
    const auto now = Clock::now();
    for (size_t i = 0; i < active.size();) {
      auto& c = active[i];
      auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
      TransportError why = TransportError::kNone;
      std::string text;
      if (c->cancelled.load()) {
        why = TransportError::kCancelled;
        text = "cancelled by the client";
      } else if (!c->got_body && secs(now - c->started) > c->spec.first_byte_timeout_s) {
        why = TransportError::kTimeout;
        text = "no response byte within " + std::to_string(static_cast<int>(c->spec.first_byte_timeout_s)) +
               " s";
      } else if (c->got_body && secs(now - c->last_byte) > c->spec.idle_timeout_s) {
        why = TransportError::kTimeout;
        text = "stream idle for over " + std::to_string(static_cast<int>(c->spec.idle_timeout_s)) + " s";
      }
      if (why != TransportError::kNone) {
        Remove(c);
        c->Finish(why, text);
        active.erase(active.begin() + i);
      } else {
        ++i;
      }
    }
  }

  void Run() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        while (!incoming.empty()) {
          Add(incoming.front());
          incoming.pop_front();
        }
      }
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        HttpCall::Impl* raw = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &raw);
        auto it = std::find_if(active.begin(), active.end(), [&](auto& c) { return c.get() == raw; });
        if (it == active.end()) continue;
        std::shared_ptr<HttpCall::Impl> c = *it;
        active.erase(it);
        CURLcode rc = m->data.result;
        std::string text = rc == CURLE_OK ? "" : curl_easy_strerror(rc);
        TransportError e = c->cancelled.load() ? TransportError::kCancelled : FromCurl(rc);
        Remove(c);
        c->Finish(e, text);
      }
      Police();
      curl_multi_poll(multi, nullptr, 0, 50, nullptr);
    }
    for (auto& c : active) {
      Remove(c);
      c->Finish(TransportError::kCancelled, "client shut down");
    }
    active.clear();
  }
};

HttpClient::HttpClient() : loop_(std::make_unique<Loop>()) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  loop_->multi = curl_multi_init();
  loop_->thread = std::thread([this] { loop_->Run(); });
}

HttpClient::~HttpClient() {
  {
    std::lock_guard<std::mutex> lock(loop_->mu);
    loop_->stopping = true;
  }
  curl_multi_wakeup(loop_->multi);
  loop_->thread.join();
  std::lock_guard<std::mutex> lock(loop_->mu);
  for (auto& c : loop_->incoming) c->Finish(TransportError::kCancelled, "client shut down");
  curl_multi_cleanup(loop_->multi);
}

std::unique_ptr<HttpCall> HttpClient::Start(HttpSpec spec) {
  auto impl = std::make_shared<HttpCall::Impl>();
  impl->spec = std::move(spec);
  {
    std::lock_guard<std::mutex> lock(loop_->mu);
    loop_->incoming.push_back(impl);
  }
  curl_multi_wakeup(loop_->multi);
  auto call = std::unique_ptr<HttpCall>(new HttpCall());
  call->impl_ = impl;
  return call;
}

}  // namespace hone::route
