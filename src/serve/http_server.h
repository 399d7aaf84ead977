// The HTTP front: the only file that sees cpp-httplib. Routes the OpenAI and
// Ollama APIs, /health, /metrics and hone's load/unload endpoints; checks API
// keys, body size and CORS; writes one JSON log line per request (never
// headers, so never keys).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "serve/config.h"
#include "serve/service.h"

namespace httplib {
class Server;
}

namespace hone::serve {

class HttpServer {
 public:
  HttpServer(const ServeConfig& config, std::vector<std::string> api_keys, uint64_t max_body,
             Service& service);
  ~HttpServer();

  // Binds host:port (port 0: any free port). Returns the port bound.
  Result<int> Bind();
  void Run();  // serves until Stop()
  void Stop();
  // /health answers 200 once this is set (some model can be served).
  void SetReady(bool ready) { ready_ = ready; }

 private:
  void Routes();
  bool Authorized(const std::string& header) const;

  ServeConfig config_;
  std::vector<std::string> api_keys_;
  uint64_t max_body_;
  Service& svc_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> ready_{false};
  std::atomic<int> port_{0};  // bound port, for the disconnect check
};

}  // namespace hone::serve
