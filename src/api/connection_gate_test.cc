// The connection gate over real loopback sockets, with workers that answer
// each request with its own bytes: what is dispatched, when, and what the
// gate answers itself (408, 429). Built under TSan by scripts/sanitize.sh.
#include "api/connection_gate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hone::api {
namespace {

// A gate on a free loopback port whose "workers" (one thread per request)
// write back "HTTP/1.1 200 OK" with the request's bytes as the body, and
// keep the connection unless the request said "close".
class Gate {
 public:
  explicit Gate(ConnectionGate::Options options = Defaults())
      : gate_(options, [this](std::unique_ptr<GateConn>& c) {
          std::lock_guard<std::mutex> lock(mu_);
          workers_.emplace_back(
              [this, conn = std::shared_ptr<GateConn>(c.release())]() mutable { Answer(std::move(conn)); });
          ++dispatched_;
          return true;
        }) {
    auto port = gate_.Listen("127.0.0.1", 0, 1024);
    EXPECT_TRUE(port.ok());
    port_ = *port;
    loop_ = std::thread([this] { gate_.Run(); });
  }
  ~Gate() {
    gate_.Stop();
    loop_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : workers_) t.join();
  }
  static ConnectionGate::Options Defaults() {
    ConnectionGate::Options o;
    o.header_timeout_s = 1;
    o.body_timeout_s = 1;
    o.read_timeout_s = 5;
    return o;
  }
  int port() const { return port_; }
  int dispatched() {
    std::lock_guard<std::mutex> lock(mu_);
    return dispatched_;
  }
  ConnectionGate& gate() { return gate_; }

 private:
  void Answer(std::shared_ptr<GateConn> conn) {
    const std::string request = conn->bytes.substr(conn->consumed, conn->framing.request_bytes());
    conn->consumed += request.size();
    const std::string out =
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(request.size()) + "\r\n\r\n" + request;
    (void)::send(conn->fd, out.data(), out.size(), MSG_NOSIGNAL);
    const bool keep = request.find("Connection: close") == std::string::npos;
    gate_.Return(std::make_unique<GateConn>(std::move(*conn)), keep);
  }

  ConnectionGate gate_;
  int port_ = 0;
  std::thread loop_;
  std::mutex mu_;  // guards workers_ and dispatched_
  std::vector<std::thread> workers_;
  int dispatched_ = 0;
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

void Send(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size()));
}

// Reads until `want` bytes, end of file, or `ms` of silence.
std::string Read(int fd, size_t want = SIZE_MAX, int ms = 3000) {
  std::string out;
  char buf[4096];
  while (out.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string Answer(const std::string& request) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(request.size()) + "\r\n\r\n" + request;
}

TEST(ConnectionGate, AWholeRequestIsDispatchedWhileHalfSentOnesWait) {
  Gate g;
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(Connect(g.port()));
    Send(slow.back(), "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"a\"");
  }
  const int fd = Connect(g.port());
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const auto t0 = std::chrono::steady_clock::now();
  Send(fd, get);
  const std::string want = Answer(get);
  EXPECT_EQ(Read(fd, want.size()), want);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(g.dispatched(), 1);              // none of the 200 half-sent ones
  EXPECT_GE(g.gate().stats().waiting, 200);  // and this one, once kept alive
  // The rest of one body arrives: that one is dispatched, whole.
  Send(slow[7], ": 12345}");
  const std::string whole = "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"a\": 12345}";
  EXPECT_EQ(Read(slow[7], Answer(whole).size()), Answer(whole));
  for (int s : slow) ::close(s);
  ::close(fd);
}

// A request that trickles in a byte at a time is read in pauses after its
// first second (so 10,000 of them do not wake the loop 10,000 times a
// second), loses no byte, and a prompt request beside it is not delayed. A
// kept-alive connection that waited before its next request is not slow.
TEST(ConnectionGate, ATricklingSenderIsReadInPausesAndLosesNoByte) {
  ConnectionGate::Options o = Gate::Defaults();
  o.header_timeout_s = o.body_timeout_s = 30;  // the pauses, not a deadline, are under test
  Gate g(o);
  const int slow = Connect(g.port());
  const std::string head = "GET /slow HTTP/1.1\r\n";
  const std::string trickled = "X-Slow: abcdefghijklmn";
  Send(slow, head);
  for (char ch : trickled) {
    Send(slow, std::string(1, ch));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(g.gate().stats().slow_read_pauses, 1u);
  EXPECT_EQ(g.dispatched(), 0);

  const int prompt = Connect(g.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // idle first: not slow
  const std::string post = "POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\n";
  const auto pauses = g.gate().stats().slow_read_pauses;
  const auto t0 = std::chrono::steady_clock::now();
  Send(prompt, post);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Send(prompt, "abc");
  EXPECT_EQ(Read(prompt, Answer(post + "abc").size()), Answer(post + "abc"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(g.gate().stats().slow_read_pauses, pauses);  // its small first segment did not pause it

  Send(slow, "\r\n\r\n");  // whole now: answered once its pause ends, every byte kept
  const std::string whole = head + trickled + "\r\n\r\n";
  EXPECT_EQ(Read(slow, Answer(whole).size(), 6000), Answer(whole));
  EXPECT_EQ(g.dispatched(), 2);
  ::close(slow);
  ::close(prompt);
}

// A pause never outlasts half of --read-timeout: a sender that keeps
// trickling is not closed as silent because its bytes waited unread.
TEST(ConnectionGate, APauseIsShorterThanTheReadTimeout) {
  ConnectionGate::Options o = Gate::Defaults();
  o.header_timeout_s = o.body_timeout_s = 30;
  o.read_timeout_s = 1.5;
  Gate g(o);
  const int fd = Connect(g.port());
  const std::string head = "GET /drip HTTP/1.1\r\n";
  const std::string trickled = "X-Drip: abcdefghijklmnopqrstuvwxyz";  // 34 bytes over ~4 s
  Send(fd, head);
  for (char ch : trickled) {
    Send(fd, std::string(1, ch));
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }
  Send(fd, "\r\n\r\n");
  const std::string whole = head + trickled + "\r\n\r\n";
  EXPECT_EQ(Read(fd, Answer(whole).size(), 3000), Answer(whole));  // not a 408 "sent nothing"
  EXPECT_GE(g.gate().stats().slow_read_pauses, 2u);
  ::close(fd);
}

TEST(ConnectionGate, KeptAliveAndPipelinedRequestsComeBackThroughTheGate) {
  Gate g;
  const int fd = Connect(g.port());
  const std::string a = "GET /a HTTP/1.1\r\n\r\n";
  const std::string b = "POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz";
  const std::string c = "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n";
  Send(fd, a + b);  // two at once: the second waits in the connection's bytes
  EXPECT_EQ(Read(fd, Answer(a).size() + Answer(b).size()), Answer(a) + Answer(b));
  Send(fd, c);
  EXPECT_EQ(Read(fd), Answer(c));  // then the gate closes it: end of file
  EXPECT_EQ(g.dispatched(), 3);
  ::close(fd);
}

TEST(ConnectionGate, Expect100ContinueIsAnsweredByTheGateAndTheBodyAwaited) {
  Gate g;
  const int fd = Connect(g.port());
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
  Send(fd, head);
  EXPECT_EQ(Read(fd, 25), "HTTP/1.1 100 Continue\r\n\r\n");
  EXPECT_EQ(g.dispatched(), 0);  // a worker only once the body is here
  Send(fd, "ping");
  EXPECT_EQ(Read(fd, Answer(head + "ping").size()), Answer(head + "ping"));
  ::close(fd);
}

TEST(ConnectionGate, HeadersOrBodyPastTheirDeadlineGet408) {
  Gate g;  // 1 s for headers, 1 s for a body
  const int head = Connect(g.port());
  Send(head, "GET /slow HTTP/1.1\r\nX: ");
  const int body = Connect(g.port());
  Send(body, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab");
  const std::string h = Read(head);
  EXPECT_EQ(h.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << h;
  EXPECT_NE(h.find("--header-timeout"), std::string::npos) << h;
  const std::string b = Read(body);
  EXPECT_NE(b.find("--body-timeout"), std::string::npos) << b;
  EXPECT_EQ(g.gate().stats().deadline_closed, 2u);
  EXPECT_EQ(g.dispatched(), 0);
  ::close(head);
  ::close(body);
}

TEST(ConnectionGate, WithDeferAcceptASilentConnectionCostsNothingUntilItsFirstByte) {
  ConnectionGate::Options o = Gate::Defaults();
  o.defer_accept_s = 5;
  o.max_per_client = 3;  // the silent ones do not count against it
  Gate g(o);
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(Connect(g.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(g.gate().stats().open, 0) << "the kernel still holds connections that sent nothing";
  // Their first bytes bring them in; each is served (up to the cap).
  const std::string request = "GET /deferred HTTP/1.1\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 3; ++i) {
    Send(silent[i], request);
    EXPECT_EQ(Read(silent[i], Answer(request).size()), Answer(request)) << "connection " << i;
  }
  for (int fd : silent) ::close(fd);
}

TEST(ConnectionGate, PastThePerClientCapTheConnectionGets429) {
  ConnectionGate::Options o = Gate::Defaults();
  o.max_per_client = 3;
  Gate g(o);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(Connect(g.port()));
  const int fourth = Connect(g.port());
  const std::string refused = Read(fourth);
  EXPECT_EQ(refused.rfind("HTTP/1.1 429 Too Many Requests\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("--max-connections-per-client"), std::string::npos);
  EXPECT_EQ(g.gate().stats().refused_per_client, 1u);
  ::close(fourth);
  ::close(held[0]);
  // The close is seen; a new connection is served.
  std::string served;
  for (int i = 0; i < 100 && served.empty(); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int fd = Connect(g.port());
    Send(fd, "GET / HTTP/1.1\r\n\r\n");
    served = Read(fd, Answer("GET / HTTP/1.1\r\n\r\n").size(), 500);
    if (served.rfind("HTTP/1.1 200", 0) != 0) served.clear();
    ::close(fd);
  }
  EXPECT_EQ(served, Answer("GET / HTTP/1.1\r\n\r\n"));
  for (size_t i = 1; i < held.size(); ++i) ::close(held[i]);
}

}  // namespace
}  // namespace hone::api
