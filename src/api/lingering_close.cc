#include "api/lingering_close.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace hone::api {

LingerResult LingerAfterAnswer(int fd, const LingerLimits& limits) {
  LingerResult out;
  if (fd < 0) return out;
  // The FIN goes after the answer: the client's read of it ends cleanly,
  // while its own sending may go on.
  ::shutdown(fd, SHUT_WR);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limits.total;
  char buf[64 * 1024];
  while (out.bytes < limits.max_bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, limits.quiet).count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;  // silent for `quiet`, or an error
    // Nonblocking, whatever the socket's own mode: poll said there is data.
    const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, limits.max_bytes - out.bytes), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n == 0) {
      out.eof = true;
      break;
    }
    if (n < 0) break;  // a reset: nothing more to wait for
    out.bytes += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace hone::api
