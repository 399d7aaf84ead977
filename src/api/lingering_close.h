// Lingering close, as nginx's lingering_close: after an answer sent before
// the request's body was read (a 413, a 401), the server half-closes and
// reads what the client still sends before it closes the socket.
//
// Why: closing a socket with unread bytes in its receive queue, or with more
// arriving, makes the kernel answer with a reset, and a client that sends its
// whole body before it reads (Python's http.client and requests, and many
// others) then sees EPIPE or ECONNRESET instead of the answer waiting in its
// receive buffer. cpp-httplib drains for 100 ms and 1 MiB only, which an
// 8 MiB body on loopback already outlasts.
#pragma once

#include <chrono>
#include <cstddef>

namespace hone::api {

struct LingerLimits {
  size_t max_bytes = 64u << 20;            // read and discarded at most
  std::chrono::milliseconds total{10000};  // the whole linger
  std::chrono::milliseconds quiet{2000};   // silence that ends it early
};

struct LingerResult {
  size_t bytes = 0;  // discarded
  bool eof = false;  // the client closed its side: a close now sends no reset
};

// Shuts down `fd`'s write side (the answer must already be written: the
// client reads it, then end of file), then reads and discards until the
// client closes, or a limit is reached. The caller closes `fd`.
LingerResult LingerAfterAnswer(int fd, const LingerLimits& limits = {});

}  // namespace hone::api
