// The upstream HTTP client against real servers on loopback: a cpp-httplib
// server that streams, stalls and refuses, and `openssl s_server` for TLS with
// a self-signed CA.
#include "route/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/test_env.h"

namespace hone::route {
namespace {

using namespace std::chrono_literals;

class Upstream {
 public:
  Upstream() {
    server_.Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Retry-After", "7");
      res.set_content("{\"ok\":true}", "application/json");
    });
    server_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body + "|" + req.get_header_value("Authorization"), "text/plain");
    });
    server_.Get("/status/429", [](const httplib::Request&, httplib::Response& res) {
      res.status = 429;
      res.set_header("Retry-After", "3");
      res.set_content("slow down", "text/plain");
    });
    // Three chunks, 150 ms apart.
    server_.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 3; ++i) {
          std::string chunk = "data: " + std::to_string(i) + "\n\n";
          sink.write(chunk.data(), chunk.size());
          std::this_thread::sleep_for(150ms);
        }
        sink.done();
        return true;
      });
    });
    // Headers at once, then nothing for 3 s before the first body byte.
    server_.Get("/slow-first-byte", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        std::this_thread::sleep_for(3s);
        sink.write("late", 4);
        sink.done();
        return true;
      });
    });
    // One chunk, then silence until the client leaves (which is recorded).
    server_.Get("/stall", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        sink.write("first", 5);
        for (int i = 0; i < 100 && sink.is_writable(); ++i) {
          std::this_thread::sleep_for(50ms);
          if (!sink.write(".", 0)) break;
        }
        if (!sink.is_writable()) client_left_ = true;
        sink.done();
        return true;
      });
    });
    // Streams a byte every 20 ms until the client leaves.
    server_.Get("/endless", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 500; ++i) {
          if (!sink.write("x", 1)) {
            client_left_ = true;
            return false;
          }
          std::this_thread::sleep_for(20ms);
        }
        sink.done();
        return true;
      });
    });
    // The client's port: the same one twice means a kept-alive connection.
    server_.Get("/port", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.remote_port), "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Upstream() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  bool client_left() const { return client_left_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> client_left_{false};
};

// A port nothing listens on: bound, read and closed again.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

HttpSpec Get(const std::string& url) {
  HttpSpec s;
  s.method = "GET";
  s.url = url;
  return s;
}

TEST(HttpClient, ReadsStatusHeadersAndBody) {
  Upstream up;
  HttpClient client;
  auto call = client.Start(Get(up.Url("/ok")));
  EXPECT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
  EXPECT_EQ(call->Header("retry-after"), "7");
  EXPECT_EQ(call->ReadAll(Clock::now() + 5s), "{\"ok\":true}");
  EXPECT_EQ(call->error(), TransportError::kNone);

  HttpSpec post;
  post.url = up.Url("/echo");
  post.body = "{\"model\":\"m\"}";
  post.headers = {"Authorization: Bearer sk-test", "Content-Type: application/json"};
  auto echo = client.Start(post);
  EXPECT_EQ(echo->WaitStatus(Clock::now() + 5s), 200);
  EXPECT_EQ(echo->ReadAll(Clock::now() + 5s), "{\"model\":\"m\"}|Bearer sk-test");

  auto limited = client.Start(Get(up.Url("/status/429")));
  EXPECT_EQ(limited->WaitStatus(Clock::now() + 5s), 429);
  EXPECT_EQ(limited->Header("retry-after"), "3");
}

TEST(HttpClient, StreamsChunksAsTheyArrive) {
  Upstream up;
  HttpClient client;
  auto t0 = Clock::now();
  auto call = client.Start(Get(up.Url("/stream")));
  ASSERT_EQ(call->WaitStatus(t0 + 5s), 200);
  std::string first;
  ASSERT_EQ(call->Next(t0 + 5s, &first), HttpCall::Read::kData);
  EXPECT_EQ(first.rfind("data: 0", 0), 0u);
  EXPECT_LT(Clock::now() - t0, 300ms);  // long before the stream ends (~450 ms)
  std::string rest = first + call->ReadAll(t0 + 5s);
  EXPECT_EQ(rest, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  EXPECT_EQ(call->error(), TransportError::kNone);
}

TEST(HttpClient, FirstByteAndIdleTimeoutsEndTheCall) {
  Upstream up;
  HttpClient client;
  HttpSpec slow = Get(up.Url("/slow-first-byte"));
  slow.first_byte_timeout_s = 0.4;
  auto t0 = Clock::now();
  auto call = client.Start(slow);
  EXPECT_EQ(call->ReadAll(t0 + 5s), "");
  EXPECT_EQ(call->error(), TransportError::kTimeout);
  EXPECT_NE(call->error_text().find("no response byte"), std::string::npos) << call->error_text();
  EXPECT_LT(Clock::now() - t0, 1500ms);

  HttpSpec stall = Get(up.Url("/stall"));
  stall.idle_timeout_s = 0.4;
  t0 = Clock::now();
  auto stalled = client.Start(stall);
  EXPECT_EQ(stalled->ReadAll(t0 + 5s), "first");
  EXPECT_EQ(stalled->error(), TransportError::kTimeout);
  EXPECT_NE(stalled->error_text().find("idle"), std::string::npos) << stalled->error_text();
  EXPECT_LT(Clock::now() - t0, 1500ms);
}

TEST(HttpClient, ARefusedConnectionIsAConnectError) {
  HttpClient client;
  const int port = FreePort();
  auto call = client.Start(Get("http://127.0.0.1:" + std::to_string(port) + "/"));
  EXPECT_EQ(call->WaitStatus(Clock::now() + 5s), 0);
  EXPECT_TRUE(call->done());
  EXPECT_EQ(call->error(), TransportError::kConnect) << call->error_text();
}

TEST(HttpClient, CancellingClosesTheConnectionSoTheUpstreamSeesIt) {
  Upstream up;
  HttpClient client;
  auto call = client.Start(Get(up.Url("/endless")));
  ASSERT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
  std::string got;
  ASSERT_EQ(call->Next(Clock::now() + 5s, &got), HttpCall::Read::kData);
  call.reset();  // dropping the call cancels it
  for (int i = 0; i < 100 && !up.client_left(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(up.client_left());
}

TEST(HttpClient, ReadAllStopsAtItsLimitAndClosesTheConnection) {
  Upstream up;
  HttpClient client;
  auto call = client.Start(Get(up.Url("/endless")));
  ASSERT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
  EXPECT_EQ(call->ReadAll(Clock::now() + 10s, 5), "xxxxx");
  for (int i = 0; i < 100 && !up.client_left(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(up.client_left()) << "the upstream saw the connection close";
}

// A CA, a server certificate for 127.0.0.1 signed by it, and `openssl s_server`.
TEST(HttpClient, TlsWithASelfSignedCaFromTheConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = testing::TempPath("tls-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string d = dir.string();
  auto sh = [&](const std::string& cmd) {
    auto r = testing::RunCommand("cd " + d + " && " + cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  };
  sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hone-test-ca -keyout ca.key -out ca.pem");
  sh("openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout srv.key -out srv.csr");
  sh("printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && openssl x509 -req -in srv.csr -CA ca.pem -CAkey "
     "ca.key "
     "-CAcreateserial -days 2 -extfile san.ext -out srv.pem");
  testing::WriteFile(d + "/models", "{\"data\":[]}");
  const int port = FreePort();
  const std::string server = "cd " + d +
                             " && exec openssl s_server -quiet -accept 127.0.0.1:" + std::to_string(port) +
                             " -cert srv.pem -key srv.key -WWW";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", server.c_str(), nullptr);
    _exit(127);
  }
  HttpClient client;
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/models";
  int status = 0;
  std::string body;
  for (int i = 0; i < 50 && status == 0; ++i) {  // until s_server listens
    HttpSpec s = Get(url);
    s.ca_file = d + "/ca.pem";
    auto call = client.Start(s);
    status = call->WaitStatus(Clock::now() + 5s);
    if (status) body = call->ReadAll(Clock::now() + 5s);
    if (!status) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "{\"data\":[]}");
  // Without the CA the same server is not trusted.
  auto untrusted = client.Start(Get(url));
  EXPECT_EQ(untrusted->WaitStatus(Clock::now() + 5s), 0);
  EXPECT_EQ(untrusted->error(), TransportError::kConnect) << untrusted->error_text();
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
}

TEST(HttpClient, SequentialCallsReuseOneKeptAliveConnection) {
  Upstream up;
  HttpClient client;
  std::string ports[3];
  for (auto& p : ports) {
    auto call = client.Start(Get(up.Url("/port")));
    ASSERT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
    p = call->ReadAll(Clock::now() + 5s);
    EXPECT_EQ(call->error(), TransportError::kNone);
  }
  EXPECT_FALSE(ports[0].empty());
  EXPECT_EQ(ports[0], ports[1]);
  EXPECT_EQ(ports[1], ports[2]);
}

TEST(HttpClient, CallsOnSeveralThreadsAtOnceEachGetTheirAnswer) {
  Upstream up;
  HttpClient client;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto call = client.Start(Get(up.Url("/stream")));
        if (call->WaitStatus(Clock::now() + 5s) != 200) continue;
        if (call->ReadAll(Clock::now() + 5s) == "data: 0\n\ndata: 1\n\ndata: 2\n\n" &&
            call->error() == TransportError::kNone)
          ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

TEST(HttpClient, ACancelFromAnotherThreadEndsAReadInProgress) {
  Upstream up;
  HttpClient client;
  auto call = client.Start(Get(up.Url("/endless")));
  ASSERT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    std::string piece;
    while (call->Next(Clock::now() + 100ms, &piece) != HttpCall::Read::kEnd) piece.clear();
    ended = true;
  });
  std::this_thread::sleep_for(200ms);
  const auto t0 = Clock::now();
  call->Cancel();
  while (!ended && Clock::now() - t0 < 2s) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(ended.load()) << "the reader still pumps a cancelled call";
  EXPECT_LT(Clock::now() - t0, 1s);
  reader.join();
  EXPECT_EQ(call->error(), TransportError::kCancelled);
  for (int i = 0; i < 100 && !up.client_left(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(up.client_left());
}

TEST(HttpClient, ACallOutlivingItsClientEndsCancelledAtItsNextRead) {
  Upstream up;
  auto client = std::make_unique<HttpClient>();
  auto call = client->Start(Get(up.Url("/endless")));
  ASSERT_EQ(call->WaitStatus(Clock::now() + 5s), 200);
  client.reset();
  std::string piece;
  HttpCall::Read r;
  while ((r = call->Next(Clock::now() + 1s, &piece)) == HttpCall::Read::kData) piece.clear();
  EXPECT_EQ(r, HttpCall::Read::kEnd);
  EXPECT_EQ(call->error(), TransportError::kCancelled);
  EXPECT_EQ(call->error_text(), "client shut down");
}

}  // namespace
}  // namespace hone::route
