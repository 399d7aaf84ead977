// The API port's front door: one thread on epoll that accepts every
// connection and reads its request until it is whole, so that no connection
// holds a worker thread before it has something to answer.
//
//   accept ──> [gate: reading]  ── request whole ──> worker (httplib parses,
//                ^    │                               routes, answers)
//                │    └─ deadline, EOF, cap ──> 408 / 429 / 503, close
//                └──────── kept alive ────────────────┘ (or: close, lingering)
//
// Why: with a worker per connection from accept, fifty clients that send
// half a header (slowloris) hold fifty workers for the header deadline and
// every other request waits behind them. Here a waiting connection costs
// its socket, a GateConn (~200 bytes) and the bytes it has sent.
//
// The gate reads only the framing (request_framing.h). It hands over at
// once what the worker must refuse (a body over the limit, framing it cannot
// read), and answers Expect: 100-continue itself so the body comes. Deadlines while in the gate:
//   --header-timeout  the whole header block, from the accept or the end of
//                     the previous answer;
//   --body-timeout    the whole body, from the end of the headers;
//   --read-timeout    silence in the middle of a request;
//   idle              5 s without a byte of a new request (as httplib's
//                     keep-alive wait was): closed without an answer.
// With defer_accept_s (--defer-accept) the kernel keeps a new connection
// until its first byte (TCP_DEFER_ACCEPT, nginx's `deferred`): ten thousand
// connections that never send cost no accept, descriptor, wakeup or close
// here, and a flood of them cannot crowd the CPU the model runs on. The
// kernel re-sends its SYN-ACK once that time is up and hands the connection
// over on the client's ACK (measured with 30: accepted at 32 s); the idle
// deadline then runs as for any connection (closed at 37 s). A client that
// vanished meanwhile is forgotten by the kernel alone.
// A request past a deadline gets 408 and the connection closes.
// A body too large to buffer (handed over after its headers) is read on the
// worker, where RequestDeadlines (request_deadline.h) keeps --body-timeout.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/request_framing.h"
#include "util/result.h"

namespace hone::api {

// One client connection. Owned by the gate while it waits for a request, by
// one worker while that request is served; never by both.
struct GateConn {
  int fd = -1;
  std::string bytes;       // received and not yet read by the HTTP parser
  size_t consumed = 0;     // of `bytes`, by the worker's parser
  RequestFraming framing;  // of the request at the front of `bytes`
  std::string peer_ip;
  int peer_port = 0;
  std::string local_ip;  // filled by the first worker that asks (getsockname)
  int local_port = 0;
  int64_t request_since_ns = 0;  // accept, or the end of the previous answer
  int64_t headers_done_ns = 0;   // 0 until the header block is whole
  int64_t last_byte_ns = 0;      // the last bytes received
  int64_t first_byte_ns = 0;     // this request's first bytes (0: none yet)
  int64_t deadline_ns = 0;       // in the gate's timer set
  bool continue_sent = false;    // the gate sent "100 Continue" for this request
  bool lingering = false;        // closing: the answer is out, the rest is discarded
  int64_t paused_until_ns = 0;   // a slow sender not read until then (0: read as bytes come)
  int slow_reads = 0;            // pauses so far in this request: each one doubles
};

class ConnectionGate {
 public:
  struct Options {
    double header_timeout_s = 30;
    double body_timeout_s = 120;
    double read_timeout_s = 30;
    double idle_timeout_s = 5;
    int max_per_client = 0;  // open connections per client address; 0: no cap
    int max_open = 0;        // open connections in all; past it: 503 (0: no cap)
    int defer_accept_s = 0;  // TCP_DEFER_ACCEPT on the listener; 0: off
    RequestFraming::Limits limits;
  };
  // Called on the gate's thread with a connection whose request is whole (or
  // must be handed over); returns false, leaving `conn` with the caller, when
  // no worker can take it (the gate answers 503).
  using Dispatch = std::function<bool(std::unique_ptr<GateConn>& conn)>;

  ConnectionGate(Options options, Dispatch dispatch);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Binds and listens (port 0: any free port). Returns the port.
  Result<int> Listen(const std::string& host, int port, int backlog);
  int listen_fd() const { return listen_fd_; }  // after Listen
  void Run();                                   // the loop, until Stop()
  void Stop();                                  // thread-safe; Run returns soon after
  // From a worker, when a request is answered: keep waits for the
  // connection's next request; otherwise it closes (lingering). Thread-safe.
  void Return(std::unique_ptr<GateConn> conn, bool keep);

  // Counters for /metrics, read from any thread.
  struct Stats {
    int64_t open = 0;     // connections now: waiting in the gate and on workers
    int64_t waiting = 0;  // in the gate, without a whole request
    uint64_t deadline_closed = 0;
    uint64_t refused_per_client = 0;
    uint64_t refused_full = 0;
    uint64_t slow_read_pauses = 0;  // times a trickling sender was left unread for a while
  };
  Stats stats() const;

 private:
  void AcceptAll(int64_t now);
  void Admit(int fd, const std::string& ip, int port, int64_t now);
  // `peer_closed`: the event reported the peer's FIN or a hangup, so the
  // socket is read to its end rather than left after a short read.
  void OnReadable(int fd, bool peer_closed, int64_t now);
  void Examine(std::unique_ptr<GateConn>& c, int64_t now);  // dispatch if whole
  void Watch(std::unique_ptr<GateConn> c, int64_t now);     // into the epoll set and timers
  void Unwatch(GateConn* c);
  void SetDeadline(GateConn* c, int64_t deadline);
  void Expire(int64_t now);
  // A sender whose request trickles in a few bytes at a time is read again
  // only after a pause, so its bytes cost one wake per pause, not one each.
  bool ShouldPause(const GateConn& c, ssize_t bytes_read, int64_t now) const;
  void Pause(GateConn* c, int64_t now);
  void ResumeDue(int64_t now);
  void Linger(std::unique_ptr<GateConn> c, int64_t now);
  void Refuse(std::unique_ptr<GateConn> c, int status, const std::string& message, int64_t now);
  void CloseNow(GateConn* c);  // the fd, the counts; the caller frees c
  void TakeReturns(int64_t now);
  void LogDeadline(const GateConn& c, const char* what, double limit_s, const char* flag, int64_t now);

  const Options options_;
  const Dispatch dispatch_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: a return or Stop
  int spare_fd_ = -1;  // given up to accept and close one connection when out of file descriptors
  int64_t accept_paused_until_ns_ = 0;  // out of descriptors, spare too: not watching the listener until then
  // Loop thread only: the connections in the gate, by fd; their deadlines;
  // open connections per client address (gate and workers).
  std::unordered_map<int, std::unique_ptr<GateConn>> conns_;
  std::set<std::pair<int64_t, GateConn*>> timers_;
  std::set<std::pair<int64_t, GateConn*>> resumes_;  // paused senders, by when to read them again
  std::unordered_map<std::string, int> per_client_;
  int64_t log_window_start_ = 0;  // deadline log lines: a few per window, then a count
  int logged_in_window_ = 0;
  int unlogged_in_window_ = 0;

  std::mutex mu_;  // guards returns_ and stopped_
  std::vector<std::pair<std::unique_ptr<GateConn>, bool>> returns_;
  bool stopped_ = false;

  std::atomic<int64_t> open_{0};
  std::atomic<int64_t> waiting_{0};
  std::atomic<uint64_t> deadline_closed_{0};
  std::atomic<uint64_t> refused_per_client_{0};
  std::atomic<uint64_t> refused_full_{0};
  std::atomic<uint64_t> slow_read_pauses_{0};
};

}  // namespace hone::api
