// The lingering close over a socket pair: the peer reads the answer and then
// end of file while it is still sending, and what it sends is read until it
// closes or a limit is reached.
#include "api/lingering_close.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

namespace hone::api {
namespace {

struct Pair {
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void CloseClient() { close(std::exchange(fd[1], -1)); }
  int fd[2] = {-1, -1};  // [0] the server's end, [1] the client's
};

// Sends `bytes` from the client's end, as a client sends its body whatever
// the server said; returns what it managed (a write fails once the server
// has closed).
size_t Send(int fd, size_t bytes) {
  const std::string block(64 * 1024, 'x');
  size_t sent = 0;
  while (sent < bytes) {
    const ssize_t n = send(fd, block.data(), std::min(block.size(), bytes - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(LingeringClose, TheClientSendsItsWholeBodyThenReadsTheAnswer) {
  Pair p;
  ASSERT_EQ(write(p.fd[0], "HTTP/1.1 413", 12), 12);  // the answer, before the body was read
  size_t sent = 0;
  std::string answer;
  // More than a socket buffer holds: without the linger this client would block forever.
  std::thread client([&] {
    sent = Send(p.fd[1], 8u << 20);
    answer = ReadAll(p.fd[1]);  // ends: the server shut its write side
    p.CloseClient();
  });
  const LingerResult r = LingerAfterAnswer(p.fd[0]);
  client.join();
  EXPECT_EQ(sent, 8u << 20);
  EXPECT_EQ(answer, "HTTP/1.1 413");
  EXPECT_TRUE(r.eof);
  EXPECT_EQ(r.bytes, 8u << 20);
}

TEST(LingeringClose, StopsAtItsByteLimit) {
  Pair p;
  std::thread client([&] { Send(p.fd[1], 4u << 20); });  // returns once the server end closes
  LingerLimits limits;
  limits.max_bytes = 1u << 20;
  const LingerResult r = LingerAfterAnswer(p.fd[0], limits);
  EXPECT_FALSE(r.eof);
  EXPECT_EQ(r.bytes, 1u << 20);
  close(std::exchange(p.fd[0], -1));
  client.join();
}

TEST(LingeringClose, StopsWhenTheClientGoesQuiet) {
  Pair p;
  ASSERT_EQ(Send(p.fd[1], 1000), 1000u);
  LingerLimits limits;
  limits.quiet = std::chrono::milliseconds(50);  // the bound is the feature: the client sends no more
  const LingerResult r = LingerAfterAnswer(p.fd[0], limits);
  EXPECT_FALSE(r.eof);
  EXPECT_EQ(r.bytes, 1000u);
}

}  // namespace
}  // namespace hone::api
