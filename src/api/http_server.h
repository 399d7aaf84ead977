// The HTTP front: the only file that sees cpp-httplib. Routes the OpenAI and
// Ollama APIs (each endpoint a codec over the one Driver), /health, /metrics
// and hone's load/unload endpoints; checks API keys, body size and CORS;
// writes one JSON log line per request (never headers, so never keys).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/driver.h"
#include "api/admin_api.h"
#include "api/origin_check.h"
#include "api/request_auth.h"
#include "backend/backend.h"
#include "api/http_config.h"
#include "serve/metrics.h"
#include "backend/model_admin.h"

namespace httplib {
class Server;
class ThreadPool;
struct Request;
struct Response;
}

namespace hone::api {

class RequestDeadlines;
class ConnectionGate;
class GatedServer;
struct GateConn;

class HttpServer {
 public:
  // Generations, embeddings and model lists go to `backend`; the Ollama and
  // hone endpoints about residency (ps, show, unload, cache) to the local models' `admin`.
  // `warm_workers`: request threads kept ready (the slots' streams and part
  // of the queue); more grow on demand up to --max-connections.
  HttpServer(const HttpConfig& config, std::vector<std::string> api_keys, uint64_t max_body,
             backend::Backend& backend, backend::ModelAdmin& admin, serve::Metrics& metrics, int warm_workers);
  ~HttpServer();

  // Binds host:port (port 0: any free port), and the probe port if set, whose
  // workers start serving at once. Returns the API port bound.
  Result<int> Bind();
  int probe_port() const { return probe_port_.load(); }  // after Bind; 0 if none
  void Run();  // serves until Stop()
  void Stop();
  // A graceful stop (SIGTERM): /health turns 503 and new requests get 503 at
  // once; requests in flight run on for up to `timeout_s`, then end with an
  // explicit error (an error event in a stream); then Stop(). Returns how
  // many were cut short. Thread-safe; not from a signal handler.
  int Drain(double timeout_s);
  // /health answers 200 once this is set (some model can be served).
  void SetReady(bool ready) { ready_ = ready; }
  // The router's views, when there is one (set before Run): GET /hone/routes
  // answers routes_json(); /metrics appends what metrics() writes.
  // More HTTP workers for requests that do not wait on a local slot (the
  // router's upstream streams): each holds a worker for its whole life.
  void AddWorkers(int n) { extra_workers_ += n; }
  void SetRouterViews(std::function<std::string()> routes_json, std::function<void(std::string*)> metrics) {
    routes_json_ = std::move(routes_json);
    router_metrics_ = std::move(metrics);
  }
  // With admin keys (set before Run), only they reach the admin endpoints:
  // /hone/load, /hone/unload, /hone/spend, /hone/routes/canary. They are
  // API keys too. Without, any API key does.
  void SetAdminKeys(std::vector<std::string> keys) { auth_.SetAdminKeys(std::move(keys)); }
  // GET /hone/spend answers spend_json() (set before Run; unset: 404).
  void SetSpendView(std::function<std::string()> spend_json) { spend_json_ = std::move(spend_json); }
  // POST /hone/routes/canary {"route": ..., "action": "status|promote|rollback"}.
  void SetCanaryControl(CanaryControl f) { canary_control_ = std::move(f); }

 private:
  using Endpoint = std::function<HttpResponse(const HttpRequest&)>;
  void Routes();
  void ApiRoutes();    // the OpenAI, Anthropic and Ollama endpoints
  void AdminRoutes();  // hone's own (admin_api.h)
  // Before routing; true when it answered (a refusal, a preflight).
  bool Guard(const httplib::Request& req, httplib::Response& res);
  void OnHttpError(const httplib::Request& req, httplib::Response& res);
  std::function<void(const httplib::Request&, httplib::Response&)> Wrap(Endpoint fn);
  void ProbeRoutes();
  void ServeOnWorker(GateConn* conn);  // one request, then the connection goes back to the gate
  void Health(httplib::Response& res) const;
  void Live(httplib::Response& res) const;
  void WriteMetrics(httplib::Response& res) const;

  const HttpConfig config_;
  const int warm_workers_;
  const uint64_t max_body_;
  RequestAuth auth_;  // keys and Host/Origin rules; admin keys set before Run, then read only
  Driver driver_;
  backend::Backend& backend_;
  backend::ModelAdmin& admin_;
  serve::Metrics& metrics_;
  // Before http_: its workers use it until they stop.
  std::unique_ptr<RequestDeadlines> deadlines_;
  std::unique_ptr<RequestDeadlines> probe_deadlines_;  // null without --probe-port
  // The API port: the gate reads each request whole on its own thread
  // (connection_gate.h), then a worker of workers_ runs http_ over it.
  std::unique_ptr<GatedServer> http_;
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<httplib::ThreadPool> workers_;  // created by Run
  std::unique_ptr<httplib::Server> probe_http_;   // null without --probe-port
  std::thread probe_thread_;                     // runs probe_http_'s listener
  std::atomic<int> probe_port_{0};
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};  // Drain began: refuse new requests
  std::atomic<bool> cut_off_{false};   // the drain deadline passed: end what runs
  std::atomic<int> in_flight_{0};      // requests not yet fully answered
  struct InFlight {                    // counts one request while it lives
    explicit InFlight(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
    ~InFlight() { n_->fetch_sub(1); }
    std::atomic<int>* n_;
  };
  // Workers kept beyond --max-connections for probes, scrapes and the 503s
  // that refuse what is past the bound.
  static constexpr int kProbeReserve = 64;
  std::atomic<int> connections_{0};  // API requests on a worker now (ServeOnWorker)
  std::atomic<int> probe_connections_{0};
  std::atomic<int> port_{0};  // bound port
  int probe_listen_fd_ = -1;  // set while binding (ListenOptions)
  std::atomic<int> extra_workers_{0};
  std::function<std::string()> routes_json_;          // set before Run, then read only
  std::function<void(std::string*)> router_metrics_;  // set before Run, then read only
  std::function<std::string()> spend_json_;           // set before Run, then read only
  CanaryControl canary_control_;                      // set before Run, then read only
};

}  // namespace hone::api
