// The disconnect check on real loopback sockets, and on table text for the
// cases a test cannot easily produce (a reset, an unreadable table).
#include "api/peer_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace hone::api {
namespace {

int PortOf(int fd) {
  sockaddr_in a{};
  socklen_t n = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

TEST(PeerWatch, SeesAClientCloseOnLoopback) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  const int server_port = PortOf(listener);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  addr.sin_port = htons(server_port);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  const int client_port = PortOf(client);

  EXPECT_FALSE(PeerHasClosed(server_port, client_port));
  close(client);  // FIN: our end goes to CLOSE_WAIT
  bool seen = false;
  for (int i = 0; i < 50 && !seen; ++i) {
    seen = PeerHasClosed(server_port, client_port);
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(seen);
  close(conn);
  close(listener);
}

TEST(PeerWatch, DecidesFromTheTable) {
  const std::string head = "  sl  local_address rem_address   st tx_queue rx_queue\n";
  const std::string listen = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n";
  const std::string open = "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000\n";
  const std::string close_wait = "   2: 0100007F:1F90 0100007F:D431 08 00000000:00000000\n";
  EXPECT_FALSE(PeerHasClosedIn(head + listen + open, 0x1F90, 0xD431));
  EXPECT_TRUE(PeerHasClosedIn(head + listen + close_wait, 0x1F90, 0xD431));
  EXPECT_TRUE(PeerHasClosedIn(head + listen, 0x1F90, 0xD431));  // reset: gone from the table
  // Without our own listener in view the table is not trusted.
  EXPECT_FALSE(PeerHasClosedIn(head, 0x1F90, 0xD431));
  EXPECT_FALSE(PeerHasClosedIn("", 0x1F90, 0xD431));
}

}  // namespace
}  // namespace hone::api
