// Deadlines for reading a whole request. cpp-httplib times out each read
// (--read-timeout) but has no deadline for a request as a whole, so a client
// that sends one header byte every few seconds (slowloris) holds a worker
// thread for as long as it likes; a thousand of them hold every worker.
//
// This watchdog gives every connection on the API port two deadlines:
//   --header-timeout  for the request's headers (default 30 s), from the
//                     accept or from the end of the previous answer (keep-alive);
//   --body-timeout    for its body, from the end of its headers (default 120 s).
// Past one, the socket is shut down: httplib's blocked read returns, it
// closes the connection and the worker is free. The handler's own time
// (prefill, a stream) is never counted.
//
// httplib does not hand a connection's socket to its task, so hone's
// accept4() (request_deadline.cc) notes each socket httplib accepts, on the
// accept thread, where the task queue picks it up (TakeAccepted) before the
// connection's task is queued.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace hone::api {

class RequestDeadlines {
 public:
  RequestDeadlines(double header_s, double request_s);
  ~RequestDeadlines();  // stops the watchdog
  RequestDeadlines(const RequestDeadlines&) = delete;
  RequestDeadlines& operator=(const RequestDeadlines&) = delete;

  // On the accept thread, right after httplib accepted: that socket (or -1)
  // and when it was accepted.
  struct Accepted {
    int fd = -1;
    int64_t at_ns = 0;  // steady_clock
  };
  static Accepted TakeAccepted();

  // On the connection's worker thread, around its whole life (the probe
  // port), or around one request (the API port, whose connections come from
  // the gate with their headers in: `headers_in`, and a.at_ns their end).
  void Open(Accepted a, bool headers_in = false);
  void Close();
  // On the worker thread, for the connection it serves (no-ops elsewhere):
  static void HeadersRead();    // the body is due by --body-timeout from now
  static void RequestRead();    // the handler runs: no deadline
  static void AnswerWritten();  // the next request's headers are due
  static int Socket();          // the connection's socket, or -1

  uint64_t dropped() const { return dropped_.load(); }

  struct Conn;  // request_deadline.cc

 private:
  void Watch();

  const std::chrono::nanoseconds header_;
  const std::chrono::nanoseconds request_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;         // GUARDED_BY(mu_)
  std::set<Conn*> open_;      // GUARDED_BY(mu_): connections on a worker now
  std::atomic<uint64_t> dropped_{0};
  std::thread watchdog_;
};

}  // namespace hone::api
