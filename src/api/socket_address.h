// A socket address as text (the API port's gate, its workers and the deadline
// watchdog each name a peer or a local address in logs and requests).
#pragma once

#include <sys/socket.h>

#include <string>

namespace hone::api {

struct SocketAddress {
  std::string ip;  // "?" when neither IPv4 nor IPv6
  int port = 0;
  std::string Text() const { return ip + ":" + std::to_string(port); }
};

SocketAddress AddressOf(const sockaddr_storage& a);
SocketAddress LocalAddressOf(int fd);  // getsockname; empty ip and port 0 on failure

}  // namespace hone::api
