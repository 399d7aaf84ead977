#include "api/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "api/socket_address.h"

namespace hone::api {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t Ns(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

// A closing connection's last reads, as nginx's lingering_close: at most
// 10 s, ended by 2 s of silence, at most 64 MiB.
constexpr int64_t kLingerTotalNs = 10'000'000'000;
constexpr int64_t kLingerQuietNs = 2'000'000'000;
constexpr size_t kLingerBytes = 64u << 20;
constexpr int64_t kLogWindowNs = 10'000'000'000;  // deadline log lines: at most...
constexpr int kLogsPerWindow = 5;                 // ...this many per window
// Slow senders: a read of fewer than this many bytes, for a request that has
// waited this long and is still not whole, pauses reading that connection
// (1 s, then 2 s, at most 4 s). A client on a slow link sends segments of
// hundreds of bytes and its headers in one; one byte at a time is a slowloris,
// and at 10,000 of them each byte was a wake of this thread on the cores decode
// needs. The deadlines still run; bytes wait in the kernel's buffer.
constexpr ssize_t kSlowReadBytes = 64;
constexpr int64_t kSlowAfterNs = 1'000'000'000;
constexpr int64_t kFirstPauseNs = 1'000'000'000;
constexpr int kMaxPauseDoublings = 2;

// A whole answer from the gate itself, in the OpenAI error envelope (the
// gate has not read the path, so cannot know the API). Best effort: the
// socket is new or idle, so its send buffer is empty and this fits.
void SendAnswer(int fd, int status, const std::string& message) {
  const char* reason = status == 408   ? "Request Timeout"
                       : status == 429 ? "Too Many Requests"
                                       : "Service Unavailable";
  const char* code = status == 408   ? "request_timeout"
                     : status == 429 ? "too_many_connections"
                                     : "overloaded";
  const std::string body = nlohmann::json{
      {"error",
       {{"message", message},
        {"type", status == 408 ? "invalid_request_error" : "server_error"},
        {"code", code}}}}.dump();
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                    "\r\nContent-Type: application/json\r\nConnection: close\r\n";
  if (status != 408) out += "Retry-After: 1\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

ConnectionGate::ConnectionGate(Options options, Dispatch dispatch)
    : options_(std::move(options)), dispatch_(std::move(dispatch)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

ConnectionGate::~ConnectionGate() {
  for (auto& [fd, c] : conns_) ::close(fd);
  for (auto& [c, keep] : returns_) ::close(c->fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_, spare_fd_})
    if (fd >= 0) ::close(fd);
}

Result<int> ConnectionGate::Listen(const std::string& host, int port, int backlog) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return MakeError(ErrorCode::kIo, std::string("cannot resolve ") + host + ": " + gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR so a restart binds while old connections sit in TIME_WAIT;
    // never SO_REUSEPORT, with which a second server would bind silently and
    // take half the connections.
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (options_.defer_accept_s > 0)
      setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &options_.defer_accept_s, sizeof options_.defer_accept_s);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) return MakeError(ErrorCode::kIo, why);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = AddressOf(bound).port;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  return bound_port;
}

void ConnectionGate::Run() {
  std::vector<epoll_event> events(256);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) break;
    }
    int64_t now = NowNs();
    int wait_ms = 1000;
    int64_t next_ns = INT64_MAX;
    if (!timers_.empty()) next_ns = timers_.begin()->first;
    if (!resumes_.empty()) next_ns = std::min(next_ns, resumes_.begin()->first);
    if (next_ns != INT64_MAX)
      wait_ms = static_cast<int>(std::clamp<int64_t>((next_ns - now) / 1'000'000 + 1, 0, 1000));
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
    now = NowNs();
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        AcceptAll(now);
      } else if (fd == wake_fd_) {
        uint64_t v;
        (void)::read(wake_fd_, &v, sizeof v);
        TakeReturns(now);
      } else {
        OnReadable(fd, (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0, now);
      }
    }
    Expire(now);
    ResumeDue(now);
    if (accept_paused_until_ns_ && now >= accept_paused_until_ns_) {
      accept_paused_until_ns_ = 0;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    }
  }
  // No more connections: a client would otherwise complete its handshake
  // into the backlog and wait there for nothing.
  ::close(listen_fd_);
  listen_fd_ = -1;
  for (auto& [fd, c] : conns_) {
    ::close(fd);
    open_.fetch_sub(1);
  }
  conns_.clear();
  timers_.clear();
  resumes_.clear();
  waiting_.store(0);
}

void ConnectionGate::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  const uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof one);
}

void ConnectionGate::Return(std::unique_ptr<GateConn> conn, bool keep) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      returns_.emplace_back(std::move(conn), keep);
    } else {
      ::close(conn->fd);  // the loop is gone: nobody waits on it
      open_.fetch_sub(1);
      return;
    }
  }
  const uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof one);
}

ConnectionGate::Stats ConnectionGate::stats() const {
  return {open_.load(),         waiting_.load(),      deadline_closed_.load(), refused_per_client_.load(),
          refused_full_.load(), slow_read_pauses_.load()};
}

void ConnectionGate::AcceptAll(int64_t now) {
  if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  while (true) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    const int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of file descriptors: the connection would sit in the backlog
        // and wake this loop forever. Take it with the spare and close it.
        ::close(spare_fd_);
        const int taken = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (taken >= 0) {
          SendAnswer(taken, 503, "the server is out of file descriptors; retry shortly");
          ::close(taken);
          refused_full_.fetch_add(1);
        }
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      if (errno == EMFILE || errno == ENFILE) {
        // No spare either: stop watching the listening socket for a moment
        // rather than spin on it (it stays readable).
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_until_ns_ = now + 100'000'000;
      }
      return;  // EAGAIN: the backlog is empty
    }
    const SocketAddress from = AddressOf(peer);
    Admit(fd, from.ip, from.port, now);
  }
}

void ConnectionGate::Admit(int fd, const std::string& ip, int port, int64_t now) {
  // Without TCP_NODELAY a response written as headers then body waits for
  // the client's delayed ACK (40 ms on Linux) on every kept-alive connection.
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  auto c = std::make_unique<GateConn>();
  c->fd = fd;
  c->peer_ip = ip;
  c->peer_port = port;
  c->request_since_ns = c->last_byte_ns = now;
  open_.fetch_add(1);
  int& mine = per_client_[ip];
  ++mine;
  if (options_.max_open > 0 && open_.load() > options_.max_open) {
    // Past the descriptor budget: no linger (it would hold the descriptor).
    refused_full_.fetch_add(1);
    SendAnswer(fd, 503,
               "the server holds " + std::to_string(options_.max_open) +
                   " open connections (its open-files limit); retry shortly");
    CloseNow(c.get());
    return;
  }
  if (options_.max_per_client > 0 && mine > options_.max_per_client) {
    refused_per_client_.fetch_add(1);
    return Refuse(std::move(c), 429,
                  "this address holds " + std::to_string(options_.max_per_client) +
                      " open connections (--max-connections-per-client); close one or retry shortly",
                  now);
  }
  Watch(std::move(c), now);
}

void ConnectionGate::Watch(std::unique_ptr<GateConn> c, int64_t now) {
  GateConn* raw = c.get();
  epoll_event ev{};
  // Edge-triggered: one wake per arrival, and each read drains the socket.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = raw->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, raw->fd, &ev);
  conns_[raw->fd] = std::move(c);
  if (!raw->lingering) waiting_.fetch_add(1);
  int64_t deadline = raw->lingering ? std::min(raw->request_since_ns + kLingerTotalNs, now + kLingerQuietNs)
                                    : raw->request_since_ns + Ns(options_.idle_timeout_s);
  SetDeadline(raw, deadline);
  // Bytes that came before the epoll registration are reported by it (ADD
  // polls the socket), and pipelined bytes already here are examined now.
  if (!raw->lingering && !raw->bytes.empty()) {
    auto it = conns_.find(raw->fd);
    Examine(it->second, now);
    if (!it->second) conns_.erase(it);  // dispatched
  }
}

void ConnectionGate::Unwatch(GateConn* c) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  timers_.erase({c->deadline_ns, c});
  if (c->paused_until_ns) resumes_.erase({c->paused_until_ns, c});
  c->paused_until_ns = 0;
  if (!c->lingering) waiting_.fetch_sub(1);
}

bool ConnectionGate::ShouldPause(const GateConn& c, ssize_t bytes_read, int64_t now) const {
  // From the request's first byte, not from accept: a kept-alive client that
  // waited before its next request is not slow.
  return !c.lingering && bytes_read < kSlowReadBytes && c.first_byte_ns > 0 &&
         now - c.first_byte_ns >= kSlowAfterNs;
}

void ConnectionGate::Pause(GateConn* c, int64_t now) {
  // Still told of a hangup (EPOLLRDHUP), not of bytes.
  epoll_event ev{};
  ev.events = EPOLLRDHUP | EPOLLET;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  // At most half of --read-timeout: bytes left unread in a pause do not move
  // last_byte_ns, and a client that keeps sending must not be closed as silent.
  const int64_t pause = std::min(kFirstPauseNs << std::min(c->slow_reads, kMaxPauseDoublings),
                                 Ns(options_.read_timeout_s) / 2);
  c->paused_until_ns = now + pause;
  ++c->slow_reads;
  resumes_.insert({c->paused_until_ns, c});
  slow_read_pauses_.fetch_add(1);
}

void ConnectionGate::ResumeDue(int64_t now) {
  while (!resumes_.empty() && resumes_.begin()->first <= now) {
    GateConn* c = resumes_.begin()->second;
    resumes_.erase(resumes_.begin());
    c->paused_until_ns = 0;
    // MOD polls the socket: bytes that came during the pause raise an event.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.fd = c->fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  }
}

void ConnectionGate::SetDeadline(GateConn* c, int64_t deadline) {
  if (c->deadline_ns == deadline && timers_.count({deadline, c})) return;
  timers_.erase({c->deadline_ns, c});
  c->deadline_ns = deadline;
  timers_.insert({deadline, c});
}

void ConnectionGate::OnReadable(int fd, bool peer_closed, int64_t now) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;  // handed over or closed earlier in this batch
  GateConn* c = it->second.get();
  static thread_local char buf[64 * 1024];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    // A short read drained the socket: with edge-triggered epoll, bytes that
    // come later raise a new event, so a second recv would only answer
    // EAGAIN. Skipping it halves the syscalls a trickling client costs (as
    // nginx does); a FIN already reported is read to its end below.
    const bool drained = n > 0 && static_cast<size_t>(n) < sizeof buf && !peer_closed;
    if (n > 0) {
      if (c->lingering) {  // discarded, up to a bound: then the reset is the client's doing
        c->consumed += static_cast<size_t>(n);
        SetDeadline(c, std::min(c->request_since_ns + kLingerTotalNs, now + kLingerQuietNs));
        if (c->consumed <= kLingerBytes) {
          if (drained) return;
          continue;
        }
        std::unique_ptr<GateConn> done = std::move(it->second);
        conns_.erase(it);
        Unwatch(done.get());
        CloseNow(done.get());
        return;
      }
      c->bytes.append(buf, static_cast<size_t>(n));
      c->last_byte_ns = now;
      if (c->first_byte_ns == 0) c->first_byte_ns = now;
      Examine(it->second, now);
      if (!it->second) {  // dispatched: a worker owns it now
        conns_.erase(it);
        return;
      }
      if (drained && !c->paused_until_ns && ShouldPause(*c, n, now)) Pause(c, now);
      if (drained) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file or an error: nothing more will come. A request still
    // partial cannot be answered.
    std::unique_ptr<GateConn> gone = std::move(it->second);
    conns_.erase(it);
    Unwatch(gone.get());
    CloseNow(gone.get());
    return;
  }
}

// Decides what the bytes so far make: dispatch a whole request (the loop
// then forgets it), or set the deadline it is now waiting under.
void ConnectionGate::Examine(std::unique_ptr<GateConn>& c, int64_t now) {
  const std::string_view pending(c->bytes.data() + c->consumed, c->bytes.size() - c->consumed);
  const auto verdict = c->framing.Examine(pending, options_.limits);
  if (c->framing.headers_complete() && c->headers_done_ns == 0) c->headers_done_ns = now;
  if (verdict == RequestFraming::Verdict::kNeedMore) {
    if (c->framing.expects_continue() && !c->continue_sent) {
      // The client waits for this before its body (the worker's parser
      // would send it; GateStream drops that second one).
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      c->continue_sent = true;
    }
    int64_t deadline = c->framing.headers_complete() ? c->headers_done_ns + Ns(options_.body_timeout_s)
                                                     : c->request_since_ns + Ns(options_.header_timeout_s);
    deadline = std::min(deadline, c->last_byte_ns + Ns(options_.read_timeout_s));
    SetDeadline(c.get(), deadline);
    return;
  }
  Unwatch(c.get());
  GateConn* raw = c.get();
  if (dispatch_(c)) return;  // c is now empty
  raw->lingering = true;     // not counted as waiting any more
  SendAnswer(raw->fd, 503, "every worker is busy; retry shortly");
  ::shutdown(raw->fd, SHUT_WR);
  raw->bytes.clear();
  raw->bytes.shrink_to_fit();
  raw->consumed = 0;
  raw->request_since_ns = now;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = raw->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, raw->fd, &ev);
  SetDeadline(raw, now + kLingerQuietNs);
}

void ConnectionGate::Expire(int64_t now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    GateConn* c = timers_.begin()->second;
    auto it = conns_.find(c->fd);
    std::unique_ptr<GateConn> owned = std::move(it->second);
    conns_.erase(it);
    if (c->lingering || c->bytes.size() == c->consumed) {
      // Done lingering, or idle: no request to answer.
      Unwatch(c);
      CloseNow(c);
      continue;
    }
    Unwatch(c);
    deadline_closed_.fetch_add(1);
    std::string message;
    const bool silent = now >= c->last_byte_ns + Ns(options_.read_timeout_s);
    if (silent) {
      LogDeadline(*c, "sent nothing", options_.read_timeout_s, "--read-timeout", now);
      message = "the request stalled: nothing came for " +
                std::to_string(static_cast<int>(options_.read_timeout_s)) + " s (--read-timeout)";
    } else if (c->framing.headers_complete()) {
      LogDeadline(*c, "body took", options_.body_timeout_s, "--body-timeout", now);
      message = "the request's body did not arrive within " +
                std::to_string(static_cast<int>(options_.body_timeout_s)) + " s (--body-timeout)";
    } else {
      LogDeadline(*c, "headers took", options_.header_timeout_s, "--header-timeout", now);
      message = "the request's headers did not arrive within " +
                std::to_string(static_cast<int>(options_.header_timeout_s)) + " s (--header-timeout)";
    }
    Refuse(std::move(owned), 408, message, now);
  }
}

void ConnectionGate::LogDeadline(const GateConn& c, const char* what, double limit_s, const char* flag,
                                 int64_t now) {
  if (now - log_window_start_ > kLogWindowNs) {
    if (unlogged_in_window_ > 0)
      std::fprintf(stderr, "[hone] closed %d more connections whose requests came too slowly\n",
                   unlogged_in_window_);
    log_window_start_ = now;
    logged_in_window_ = unlogged_in_window_ = 0;
  }
  if (logged_in_window_++ >= kLogsPerWindow) {
    ++unlogged_in_window_;
    return;
  }
  if (std::strcmp(what, "sent nothing") == 0)
    std::fprintf(stderr,
                 "[hone] closed the connection from %s:%d: its request sent nothing for %.0f s (%s)\n",
                 c.peer_ip.c_str(), c.peer_port, limit_s, flag);
  else
    std::fprintf(stderr, "[hone] closed the connection from %s:%d: its request %s over %.0f s (%s)\n",
                 c.peer_ip.c_str(), c.peer_port, what, limit_s, flag);
}

void ConnectionGate::Refuse(std::unique_ptr<GateConn> c, int status, const std::string& message,
                            int64_t now) {
  SendAnswer(c->fd, status, message);
  Linger(std::move(c), now);
}

// Half-closes and reads what the client still sends until it closes or
// kLingerNs pass: closing with unread bytes would reset the connection, and
// the client would see the reset instead of the answer.
void ConnectionGate::Linger(std::unique_ptr<GateConn> c, int64_t now) {
  ::shutdown(c->fd, SHUT_WR);
  c->lingering = true;
  c->bytes.clear();
  c->bytes.shrink_to_fit();
  c->consumed = 0;            // now: bytes discarded
  c->request_since_ns = now;  // now: when the linger began
  Watch(std::move(c), now);
}

void ConnectionGate::CloseNow(GateConn* c) {
  ::close(c->fd);
  open_.fetch_sub(1);
  auto it = per_client_.find(c->peer_ip);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

void ConnectionGate::TakeReturns(int64_t now) {
  std::vector<std::pair<std::unique_ptr<GateConn>, bool>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returns_);
  }
  for (auto& [c, keep] : back) {
    if (!keep && c->headers_done_ns == 0) {
      // Refused before its headers were whole (a 300 MiB header): there is
      // nothing to drain but more of the same, so no linger.
      CloseNow(c.get());
      continue;
    }
    if (!keep) {
      Linger(std::move(c), now);
      continue;
    }
    // The next request's deadlines count from the end of this answer.
    c->bytes.erase(0, c->consumed);
    c->consumed = 0;
    if (c->bytes.empty()) std::string().swap(c->bytes);  // an idle connection holds no buffer
    c->framing.Reset();
    c->continue_sent = false;
    c->slow_reads = 0;
    c->first_byte_ns = c->bytes.empty() ? 0 : now;
    c->request_since_ns = c->last_byte_ns = now;
    c->headers_done_ns = 0;
    Watch(std::move(c), now);
  }
}

}  // namespace hone::api
