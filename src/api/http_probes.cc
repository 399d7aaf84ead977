// HttpServer's probes and operator views: /health, /livez and /metrics (on
// the API port and on --probe-port), and the probe port's own server. They
// read counters only, never a scheduler lock.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/connection_gate.h"
#include "api/http_server.h"
#include "api/http_sockets.h"
#include "api/origin_check.h"
#include "api/request_deadline.h"

namespace hone::api {

void HttpServer::Health(httplib::Response& res) const {
  const bool draining = draining_.load();
  const bool ok = ready_.load() && !draining;
  res.status = ok ? 200 : 503;
  res.set_content(ok         ? R"({"status":"ok"})"
                  : draining ? R"({"status":"draining"})"
                             : R"({"status":"starting"})",
                  "application/json");
}

void HttpServer::Live(httplib::Response& res) const {
  // Alive while this process serves HTTP, busy or not, draining or not: a
  // liveness probe that failed during a long prefill would restart a
  // healthy server.
  res.set_content(R"({"status":"alive"})", "application/json");
}

void HttpServer::WriteMetrics(httplib::Response& res) const {
  std::string body = metrics_.Render(config_.metrics_compat == "vllm");
  // A router over replicas reads this to stop sending here while streams finish.
  body += serve::FamilyHeader("hone_server_draining", "gauge",
                              "1 once SIGTERM began a drain: new requests get 503") +
          "hone_server_draining " + (draining_.load() ? "1" : "0") + "\n";
  const ConnectionGate::Stats gate = gate_->stats();
  body += serve::FamilyHeader("hone_http_request_deadline_closed_total", "counter",
                              "Connections closed because a request's headers or body came too slowly") +
          "hone_http_request_deadline_closed_total " + std::to_string(deadlines_->dropped() + gate.deadline_closed) +
          "\n";
  body += serve::FamilyHeader("hone_http_connections_open", "gauge",
                              "Client connections open on the API port (waiting for a request or being served)") +
          "hone_http_connections_open " + std::to_string(gate.open) + "\n";
  body += serve::FamilyHeader("hone_http_connections_waiting", "gauge",
                              "Connections whose request is not yet whole (held by the event loop, not a worker)") +
          "hone_http_connections_waiting " + std::to_string(gate.waiting) + "\n";
  body += serve::FamilyHeader("hone_http_connections_refused_total", "counter",
                              "Connections refused at accept: per client address, or past the open-files bound") +
          "hone_http_connections_refused_total{reason=\"per_client\"} " + std::to_string(gate.refused_per_client) +
          "\nhone_http_connections_refused_total{reason=\"open_files\"} " + std::to_string(gate.refused_full) + "\n";
  body += serve::FamilyHeader("hone_http_slow_read_pauses_total", "counter",
                              "Times a connection sending its request a few bytes at a time was left unread for 1-4 s") +
          "hone_http_slow_read_pauses_total " + std::to_string(gate.slow_read_pauses) + "\n";
  if (router_metrics_) router_metrics_(&body);
  res.set_content(body, "text/plain; version=0.0.4");
}

// The probe port: its own four workers, so probes and scrapes never wait behind
// streams that hold every API worker. It reads counters only, never a
// scheduler lock. No key (nothing on it reads or runs a prompt), but the Host
// and Origin checks hold as on the API port.
void HttpServer::ProbeRoutes() {
  httplib::Server& s = *probe_http_;
  // One request per connection and short timeouts: an idle kept-alive
  // connection would hold one of the few workers. A client that drips its
  // request would too: it has 2 s for all of it (probe_deadlines_).
  s.new_task_queue = [this] {
    return new CountingPool(4, 4, /*max_queued=*/1024, &probe_connections_, probe_deadlines_.get());
  };
  s.set_tcp_nodelay(true);
  s.set_socket_options(ListenOptions(&probe_listen_fd_));
  s.set_payload_max_length(4096);
  s.set_read_timeout(2, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_max_count(1);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    RequestDeadlines::HeadersRead();  // the rest (a body, if any) within the same 2 s
    auto refused = CheckHost(auth_.origins(), req.get_header_value("Host"));
    if (!refused) refused = CheckOrigin(auth_.origins(), req.get_header_value("Origin"));
    if (!refused) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 403;
    res.set_content(nlohmann::json{{"error", *refused}}.dump(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    res.set_content(nlohmann::json{{"error", "the probe port serves GET /health, /livez and /metrics, not " +
                                                 req.method + " " + req.path}}
                        .dump(),
                    "application/json");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
  s.Get("/livez", [this](const httplib::Request&, httplib::Response& res) { Live(res); });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { WriteMetrics(res); });
}

}  // namespace hone::api
