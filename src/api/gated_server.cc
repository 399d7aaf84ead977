#include "api/gated_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "api/socket_address.h"

namespace hone::api {
namespace {

// Waits up to `timeout_s` for `events` on `fd`; false on a timeout or an error.
bool WaitFor(int fd, short events, int timeout_s) {
  pollfd p{fd, events, 0};
  while (true) {
    const int ready = ::poll(&p, 1, timeout_s * 1000);
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0;
  }
}

// A stream over a GateConn: first the bytes the gate already read, then the
// socket (nonblocking, so every read and write waits with poll first). It
// never reads past what the parser asks for, so the next pipelined request
// stays in the socket or in `bytes` for the gate.
class GateStream final : public httplib::Stream {
 public:
  GateStream(GateConn& conn, int read_timeout_s, int write_timeout_s)
      : conn_(conn), read_timeout_s_(read_timeout_s), write_timeout_s_(write_timeout_s) {}

  bool is_readable() const override { return conn_.consumed < conn_.bytes.size(); }
  bool wait_readable() const override { return is_readable() || WaitFor(conn_.fd, POLLIN, read_timeout_s_); }
  bool wait_writable() const override { return WaitFor(conn_.fd, POLLOUT, write_timeout_s_); }
  bool is_peer_alive() const override {
    pollfd p{conn_.fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    char b;
    return ::recv(conn_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (is_readable()) {
      const size_t n = std::min(size, conn_.bytes.size() - conn_.consumed);
      std::memcpy(ptr, conn_.bytes.data() + conn_.consumed, n);
      conn_.consumed += n;
      return static_cast<ssize_t>(n);
    }
    while (true) {
      if (!WaitFor(conn_.fd, POLLIN, read_timeout_s_)) {
        error_ = httplib::Error::Timeout;
        return -1;
      }
      const ssize_t n = ::recv(conn_.fd, ptr, size, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n == 0) error_ = httplib::Error::ConnectionClosed;
      if (n < 0) error_ = httplib::Error::Read;
      return n;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    // httplib answers Expect: 100-continue as it reads the headers; when the
    // gate already did (the body is here), that second interim answer is
    // dropped: its status line, then its blank line.
    if (conn_.continue_sent && dropped_continue_ < 2) {
      const std::string_view s(ptr, size);
      if (dropped_continue_ == 0 && s == "HTTP/1.1 100 Continue\r\n")
        return ++dropped_continue_, ssize_t(size);
      if (dropped_continue_ == 1 && s == "\r\n") return ++dropped_continue_, ssize_t(size);
      dropped_continue_ = 2;
    }
    while (true) {
      const ssize_t n = ::send(conn_.fd, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;  // httplib writes the rest
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait_writable()) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = conn_.peer_ip;
    port = conn_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    // Once per connection: a kept-alive one keeps its local address.
    if (conn_.local_port == 0) {
      const SocketAddress local = LocalAddressOf(conn_.fd);
      conn_.local_ip = local.ip;
      conn_.local_port = local.port;
    }
    ip = conn_.local_ip;
    port = conn_.local_port;
  }
  socket_t socket() const override { return conn_.fd; }
  time_t duration() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_)
        .count();
  }
  void set_read_timeout(time_t sec, time_t) override { read_timeout_s_ = static_cast<int>(sec); }
  const char* buffered_data(size_t& size) const override {
    size = conn_.bytes.size() - conn_.consumed;
    return size ? conn_.bytes.data() + conn_.consumed : nullptr;
  }
  void consume_buffered(size_t size) override { conn_.consumed += size; }

 private:
  GateConn& conn_;
  int dropped_continue_ = 0;  // of the parser's "100 Continue": its line, its blank line
  int read_timeout_s_;
  const int write_timeout_s_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Set when the answer being written says "Connection: close" (httplib says
// so after any error, without telling its caller).
thread_local bool t_answer_closes = false;

}  // namespace

GatedServer::GatedServer() {
  set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    t_answer_closes = res.get_header_value("Connection") == "close";
  });
}

bool GatedServer::ServeOne(GateConn& conn, int read_timeout_s, int write_timeout_s) {
  std::string local_ip;
  int local_port = 0;
  GateStream stream(conn, read_timeout_s, write_timeout_s);
  stream.get_local_ip_and_port(local_ip, local_port);
  bool closed = false;
  bool upgraded = false;
  t_answer_closes = false;
  const bool ok = serve_guarded([&] {
    return process_request(stream, conn.peer_ip, conn.peer_port, local_ip, local_port,
                           /*close_connection=*/false, closed, nullptr, &upgraded);
  });
  return ok && !closed && !upgraded && !t_answer_closes;
}

}  // namespace hone::api
