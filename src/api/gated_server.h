// cpp-httplib's server, fed by the connection gate (connection_gate.h)
// instead of its own accept loop: a worker serves one whole request from a
// GateConn (the bytes the gate read, then the socket for anything beyond)
// and gives the connection back. Private to http_server.cc.
#pragma once

#include <httplib.h>

#include "api/connection_gate.h"

namespace hone::api {

class GatedServer final : public httplib::Server {
 public:
  GatedServer();
  // Streams run while open (httplib ends a content provider's writes once
  // its listening socket is gone): from Bind, with the gate's socket, until
  // Stop.
  void SetOpen(int listen_fd) { svr_sock_ = listen_fd; }
  void SetClosed() { svr_sock_ = INVALID_SOCKET; }
  // Parses, routes and answers the request at the front of `conn` (httplib's
  // pre-routing, handlers, error handler and logger run as for its own
  // connections). Returns whether the connection may carry another request.
  bool ServeOne(GateConn& conn, int read_timeout_s, int write_timeout_s);
};

}  // namespace hone::api
