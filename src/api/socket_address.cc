#include "api/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace hone::api {

SocketAddress AddressOf(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  SocketAddress out;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    out.port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    out.port = ntohs(v6->sin6_port);
  }
  out.ip = host;
  return out;
}

SocketAddress LocalAddressOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {};
  return AddressOf(a);
}

}  // namespace hone::api
