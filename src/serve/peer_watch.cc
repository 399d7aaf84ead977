#include "serve/peer_watch.h"

#include <fstream>
#include <sstream>

namespace hone::serve {
namespace {

constexpr const char* kListen = "0A";     // TCP_LISTEN
constexpr const char* kCloseWait = "08";  // TCP_CLOSE_WAIT: the peer sent FIN

// "0100007F:1F90" -> 0x1F90; -1 when malformed.
int PortOf(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  try {
    return std::stoi(address.substr(colon + 1), nullptr, 16);
  } catch (...) {
    return -1;
  }
}

}  // namespace

bool PeerHasClosedIn(const std::string& table, int local_port, int remote_port) {
  std::istringstream lines(table);
  std::string line;
  bool listener = false, open = false, closed = false;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state;
    if (!(f >> slot >> local >> remote >> state) || PortOf(local) != local_port) continue;
    if (state == kListen) {
      listener = true;
    } else if (PortOf(remote) == remote_port) {
      (state == kCloseWait ? closed : open) = true;
    }
  }
  // Absent while our listener is visible: the peer reset the connection. An
  // open match wins (another client may share the port number on another address).
  return !open && (closed || listener);
}

bool PeerHasClosed(int local_port, int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return false;
  std::string table;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    if (!in) continue;
    std::ostringstream s;
    s << in.rdbuf();
    table += s.str();
  }
  return !table.empty() && PeerHasClosedIn(table, local_port, remote_port);
}

}  // namespace hone::serve
