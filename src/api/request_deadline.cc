#include "api/request_deadline.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "api/socket_address.h"

namespace hone::api {
namespace {

using Clock = std::chrono::steady_clock;

thread_local int t_accepted = -1;                       // the socket this thread's accept4 returned last
thread_local int64_t t_accepted_at = 0;                 // and when
thread_local RequestDeadlines::Conn* t_conn = nullptr;  // the connection this worker serves

}  // namespace

// accept4 as libc's, noting the socket: httplib (linked into this binary)
// calls it on its accept thread and queues the connection's task right
// after, on the same thread (CountingPool::enqueue takes it from there).
extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  const int s = static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
  t_accepted = s;
  t_accepted_at = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  return s;
}

struct RequestDeadlines::Conn {
  int fd = -1;
  sockaddr_storage peer{};  // to tell this connection from a later one on a reused fd
  socklen_t peer_len = 0;
  // Nanoseconds since the clock's epoch when the phase began; 0: no deadline.
  std::atomic<int64_t> since{0};
  std::atomic<bool> headers_in{false};
  bool shut = false;  // GUARDED_BY(RequestDeadlines::mu_)
};

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

RequestDeadlines::RequestDeadlines(double header_s, double request_s)
    : header_(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(header_s))),
      request_(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(request_s))),
      watchdog_([this] { Watch(); }) {}

RequestDeadlines::~RequestDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
}

RequestDeadlines::Accepted RequestDeadlines::TakeAccepted() {
  return {std::exchange(t_accepted, -1), t_accepted_at};
}

void RequestDeadlines::Open(Accepted a, bool headers_in) {
  auto* c = new Conn;
  c->fd = a.fd;
  c->peer_len = sizeof c->peer;
  if (getpeername(a.fd, reinterpret_cast<sockaddr*>(&c->peer), &c->peer_len) != 0) c->peer_len = 0;
  // From the accept: a client that drips while it waits for a worker has had
  // that time. But one the server itself kept waiting gets a second on a
  // worker to show its headers (already sent, if it is an honest client).
  c->headers_in = headers_in;
  c->since = headers_in
                 ? a.at_ns
                 : std::max<int64_t>(a.at_ns, NowNs() - header_.count() +
                                                  std::chrono::nanoseconds(std::chrono::seconds(1)).count());
  t_conn = c;
  std::lock_guard<std::mutex> lock(mu_);
  open_.insert(c);
}

void RequestDeadlines::Close() {
  Conn* c = std::exchange(t_conn, nullptr);
  if (!c) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(c);
  }
  delete c;
}

void RequestDeadlines::HeadersRead() {
  if (!t_conn) return;
  t_conn->headers_in = true;
  t_conn->since = NowNs();  // the body's deadline counts from here
}

void RequestDeadlines::RequestRead() {
  if (t_conn) t_conn->since = 0;
}

void RequestDeadlines::AnswerWritten() {
  if (!t_conn) return;
  t_conn->headers_in = false;
  t_conn->since = NowNs();
}

int RequestDeadlines::Socket() { return t_conn ? t_conn->fd : -1; }

void RequestDeadlines::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(500));
    const int64_t now = NowNs();
    for (Conn* c : open_) {
      const int64_t since = c->since.load();
      if (since == 0 || c->shut) continue;
      const bool headers_in = c->headers_in.load();
      if (now - since <= (headers_in ? request_ : header_).count()) continue;
      // Still writing the last answer to a slow reader: that is the write
      // timeout's business, not a request deadline.
      int unsent = 0;
      if (ioctl(c->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0) continue;
      // The worker may have closed this socket a moment ago and the number
      // been reused: only the same peer is this connection.
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      if (c->peer_len == 0 || getpeername(c->fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
          len != c->peer_len || std::memcmp(&peer, &c->peer, len) != 0)
        continue;
      shutdown(c->fd, SHUT_RDWR);  // the worker's read returns; httplib closes the connection
      c->shut = true;
      ++dropped_;
      std::fprintf(stderr, "[hone] closed the connection from %s: its request %s took over %.0f s (%s)\n",
                   AddressOf(c->peer).Text().c_str(), headers_in ? "body" : "headers",
                   std::chrono::duration<double>(headers_in ? request_ : header_).count(),
                   headers_in ? "--body-timeout" : "--header-timeout");
    }
  }
}

}  // namespace hone::api
