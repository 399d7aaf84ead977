// `hone route canary status|promote|rollback ROUTE`: shows and drives a
// running server's gray release (POST /hone/routes/canary). The server's API
// key, where it has one, comes from HONE_API_KEY, never from the command line.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "route/http_client.h"

namespace hone::cli {
namespace {

struct RouteArgs {
  std::string action;
  std::string route;
  std::string url = "http://127.0.0.1:8080";
  bool json = false;
};

int Run(const RouteArgs& a) {
  route::HttpClient http;
  route::HttpSpec spec;
  std::string base = a.url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  spec.url = base + "/hone/routes/canary";
  spec.headers = {"Content-Type: application/json"};
  if (const char* key = std::getenv("HONE_API_KEY"); key && *key)
    spec.headers.push_back(std::string("Authorization: Bearer ") + key);
  spec.body = nlohmann::json{{"route", a.route}, {"action", a.action}}.dump();
  spec.connect_timeout_s = 5;
  spec.first_byte_timeout_s = 10;
  spec.total_timeout_s = 15;
  auto call = http.Start(spec);
  const int status = call->WaitStatus(route::Clock::now() + std::chrono::seconds(15));
  if (status == 0) return Fail("cannot reach " + spec.url + ": " + call->error_text());
  const std::string body = call->ReadAll(route::Clock::now() + std::chrono::seconds(10), 1 << 20);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (status != 200) {
    const std::string why = j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message")
                                ? j["error"]["message"].get<std::string>()
                                : body;
    return Fail("HTTP " + std::to_string(status) + ": " + why);
  }
  if (a.json || j.is_discarded()) {
    std::printf("%s\n", body.c_str());
    return 0;
  }
  auto arm = [](const nlohmann::json& w) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%ld requests, error rate %.3f, TTFT p99 %.3f s, total p99 %.3f s",
                  w["requests"].get<long>(), w["error_rate"].get<double>(), w["ttft_p99_s"].get<double>(),
                  w["total_p99_s"].get<double>());
    return std::string(buf);
  };
  std::printf("route %s: canary %s is %s at %g%% (step %zu of %zu, %.0f s of a %.0f s hold)\n",
              j["route"].get<std::string>().c_str(), j["target"].get<std::string>().c_str(),
              j["state"].get<std::string>().c_str(), j["percent"].get<double>(), j["step"].get<size_t>() + 1,
              j["steps"].size(), j["step_age_s"].get<double>(), j["hold_s"].get<double>());
  std::printf("  candidate: %s\n  baseline:  %s\n  last move: %s\n", arm(j["candidate"]).c_str(),
              arm(j["baseline"]).c_str(), j["reason"].get<std::string>().c_str());
  return 0;
}

Runner AddRouteCommand(CLI::App& app) {
  auto a = std::make_shared<RouteArgs>();
  CLI::App* route = app.add_subcommand("route", "Drive a running server's routes");
  route->require_subcommand(1);
  CLI::App* canary = route->add_subcommand("canary", "A route's gray release: status, promote or rollback");
  canary->add_option("action", a->action, "status, promote or rollback")
      ->required()
      ->check(CLI::IsMember({"status", "promote", "rollback"}));
  canary->add_option("route", a->route, "The route's name")->required();
  canary->add_option("--url", a->url, "The server (default http://127.0.0.1:8080); its key from HONE_API_KEY");
  canary->add_flag("--json", a->json, "Print the canary's state as JSON");
  return [a]() { return Run(*a); };
}

const CommandRegistrar kRegistrar(97, &AddRouteCommand);

}  // namespace
}  // namespace hone::cli
