// Has an HTTP client gone away? cpp-httplib 0.11 (Debian 12's) cannot tell:
// its writability check passes on a socket the peer has closed, so a client
// that disconnects while its prompt is still being prefilled, or while it waits
// for a non-streamed answer, would be noticed only at the final write. The
// kernel knows: the server's end of the connection is in CLOSE_WAIT (the peer
// sent FIN) or gone from the table (the peer sent RST). Linux only.
#pragma once

#include <string>

namespace hone::api {

// True when the TCP connection between our `local_port` and the peer's
// `remote_port` is known to be closed by the peer. False when it is open or
// when the kernel's tables cannot be read or do not show our own listener
// (a sandbox): unknown never cancels anything. The answer may be up to 200 ms
// old: one snapshot of the table is shared by all callers.
bool PeerHasClosed(int local_port, int remote_port);

// For tests: the same decision over the text of /proc/net/tcp (and tcp6).
bool PeerHasClosedIn(const std::string& proc_net_tcp, int local_port, int remote_port);

}  // namespace hone::api
