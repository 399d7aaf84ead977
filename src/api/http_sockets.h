// The probe port's sockets and workers, as cpp-httplib takes them: the
// listening socket's options and backlog, and the worker pool that counts
// the connections it holds. (The API port's connections come from the
// connection gate, connection_gate.h.) Private to the HTTP server's files.
#pragma once

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <functional>

#include "api/request_deadline.h"

namespace hone::api {

// Each task is one connection's whole life on a worker (its requests, their
// streams, its keep-alive waits): counting running tasks counts the
// connections held, which the pre-routing check bounds with 503.
// The task also carries the connection's socket (noted by hone's accept4,
// request_deadline.h) to the watchdog that enforces the request deadlines.
class CountingPool final : public httplib::TaskQueue {
 public:
  CountingPool(size_t base, size_t max, size_t max_queued, std::atomic<int>* held,
               RequestDeadlines* deadlines)
      : pool_(base, max, max_queued), held_(held), deadlines_(deadlines) {}
  bool enqueue(std::function<void()> fn) override {
    // On the accept thread, just after accept4.
    const RequestDeadlines::Accepted conn = RequestDeadlines::TakeAccepted();
    return pool_.enqueue([held = held_, deadlines = deadlines_, conn, fn = std::move(fn)] {
      held->fetch_add(1);
      if (conn.fd >= 0) deadlines->Open(conn);
      fn();
      if (conn.fd >= 0) deadlines->Close();
      held->fetch_sub(1);
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;  // grows from base to max threads on demand
  std::atomic<int>* held_;
  RequestDeadlines* deadlines_;
};

// Listening sockets: SO_REUSEADDR (a restart binds while old connections sit
// in TIME_WAIT) but not httplib's default SO_REUSEPORT, with which a second
// server on the same port binds silently and takes half the connections.
// The socket is remembered so that Bind can widen httplib's accept backlog.
inline httplib::SocketOptions ListenOptions(int* fd) {
  return [fd](int sock) {
    int on = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    *fd = sock;
  };
}

// httplib listens with a backlog of 128: a burst of a thousand connects
// overflows it, and the kernel drops handshakes, which clients retry after
// about a second (a /health probe included). Listening again on the bound
// socket raises it (the kernel caps it at net.core.somaxconn).
inline void WidenBacklog(int fd, int connections) {
  if (fd >= 0) ::listen(fd, std::max(128, connections));
}

}  // namespace hone::api
