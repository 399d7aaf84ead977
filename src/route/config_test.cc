// [[upstream]] and [[route]] from TOML: the support-chat example, and every
// mistake an operator makes getting a precise message.
#include "route/config.h"

#include <gtest/gtest.h>

#include <map>

namespace hone::route {
namespace {

std::map<std::string, std::string> g_env;
const char* FakeEnv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

const char* kSupport = R"(
port = 8080
[[upstream]]
name = "cloud"
base_url = "https://api.example.com/v1/"
api_keys_env = ["CLOUD_A", "CLOUD_B"]
models = { "support" = "qwen2.5-7b-instruct" }
connect_timeout = "3s"
first_byte_timeout = "1.5s"
idle_timeout = 20
max_concurrent = 32
price_input_per_m = 0.15
price_output_per_m = 0.6
breaker = { consecutive_failures = 3, cooldown = "10s" }

[[route]]
name = "support"
targets = ["local:qwen2.5-0.5b", "cloud:support"]
ttft_slo = "1500ms"
retry = { max_attempts = 2, base_backoff = "50ms" }
)";

TEST(RouterConfig, ReadsTheSupportChatExample) {
  g_env = {{"CLOUD_A", "sk-a"}, {"CLOUD_B", "sk-b"}};
  auto c = ParseRouterConfig(kSupport, "hone.toml", FakeEnv);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->upstreams.size(), 1u);
  const UpstreamConfig& u = c->upstreams[0];
  EXPECT_EQ(u.base_url, "https://api.example.com/v1");
  EXPECT_EQ(u.keys, (std::vector<std::string>{"sk-a", "sk-b"}));
  EXPECT_EQ(u.models.at("support"), "qwen2.5-7b-instruct");
  EXPECT_DOUBLE_EQ(u.connect_timeout_s, 3);
  EXPECT_DOUBLE_EQ(u.first_byte_timeout_s, 1.5);
  EXPECT_DOUBLE_EQ(u.idle_timeout_s, 20);
  EXPECT_EQ(u.max_concurrent, 32);
  EXPECT_EQ(u.health_path, "/models");
  EXPECT_DOUBLE_EQ(u.health_interval_s, 30);
  EXPECT_EQ(u.breaker.consecutive_failures, 3);
  EXPECT_DOUBLE_EQ(u.breaker.cooldown_s, 10);
  ASSERT_EQ(c->routes.size(), 1u);
  const RouteConfig& r = c->routes[0];
  EXPECT_EQ(r.policy, Policy::kLocalFirst);
  ASSERT_EQ(r.targets.size(), 2u);
  EXPECT_TRUE(r.targets[0].local());
  EXPECT_EQ(r.targets[1].Label(), "cloud:support");
  EXPECT_DOUBLE_EQ(r.ttft_slo_s, 1.5);
  EXPECT_EQ(r.retry.max_attempts, 2);
  EXPECT_DOUBLE_EQ(r.retry.base_backoff_s, 0.05);
}

TEST(RouterConfig, NoRouterTablesIsAnEmptyConfig) {
  auto c = ParseRouterConfig("port = 1\n", "x.toml", FakeEnv);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->empty());
}

TEST(RouterConfig, MistakesAreNamedPrecisely) {
  g_env = {};
  struct Case {
    std::string toml, expect;
  };
  const std::vector<Case> cases = {
      {"[[upstream]]\nbase_url='https://x'\n", "name is required"},
      {"[[upstream]]\nname='c'\nbase_url='ftp://x'\n", "must start with http"},
      {"[[upstream]]\nname='local'\nbase_url='http://x'\n", "cannot be an upstream"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\napi_keys_env='NOPE'\n", "NOPE, which is not set"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\nidle_timeout='3 parsecs'\n", "unknown unit"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\nfirst_byte_timeout='0s'\n", "must be more than 0"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\n[[upstream]]\nname='c'\nbase_url='http://y'\n",
       "defined twice"},
      {"[[route]]\nname='r'\ntargets=['nowhere:m']\n", "names no [[upstream]] 'nowhere'"},
      {"[[route]]\nname='r'\ntargets=['justaname']\n", "must look like"},
      {"[[route]]\nname='r'\ntargets=['local:m']\npolicy='random'\n", "policy must be"},
      {"[[route]]\nname='r'\ntargets=['local:m']\npolicy='weighted'\n", "one weight per target"},
      {"[[route]]\nname='r'\ntargets=[]\n", "at least one"},
      {"[[route]\n", "line 1"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\nkind='vllm'\n", "kind must be openai or hone"},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\nmetrics_url='http://x/metrics'\n", "needs kind = \"hone\""},
      {"[[upstream]]\nname='c'\nbase_url='http://x'\nkind='hone'\nload_interval='10ms'\n", "at least 50ms"},
  };
  for (const Case& c : cases) {
    auto r = ParseRouterConfig(c.toml, "hone.toml", FakeEnv);
    ASSERT_FALSE(r.ok()) << c.toml;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << c.toml << "\n" << r.error().message;
    EXPECT_NE(r.error().message.find("hone.toml"), std::string::npos) << r.error().message;
  }
}

TEST(RouterConfig, ReadsBudgetsTheCacheAndACanary) {
  g_env = {{"PG", "host=/tmp/x dbname=hone"}};
  const char* toml = R"(
[spend]
ledger = "postgres"
postgres_url_env = "PG"
timezone = "Asia/Shanghai"
reservation_ttl = "2m"
reserve_max_tokens = 512
alert_webhook = "http://127.0.0.1:9/hook"
alert_thresholds = [0.9]

[cache]
max_bytes = "2M"
ttl = "30s"

[[upstream]]
name = "cloud"
base_url = "http://127.0.0.1:1/v1"
price_input_per_m = 0.15
price_output_per_m = 0.6

[[route]]
name = "r"
targets = ["cloud:m"]
on_budget_exceeded = "refuse"
cache = "all"
canary = { target = "cloud:m2", steps = [10, 100], hold = "1m", min_requests = 5, shadow = true }

[[budget]]
name = "month"
scope = "upstream:cloud"
monthly = 12.5
daily = 1

[[budget]]
name = "acme"
scope = "tenant:key-1a2b3c4d"
monthly = 3
)";
  auto c = ParseRouterConfig(toml, "hone.toml", FakeEnv);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->spend.ledger, "postgres");
  EXPECT_EQ(c->spend.postgres_url, "host=/tmp/x dbname=hone");
  EXPECT_EQ(c->spend.timezone, "Asia/Shanghai");
  EXPECT_DOUBLE_EQ(c->spend.reservation_ttl_s, 120);
  EXPECT_EQ(c->spend.reserve_max_tokens, 512);
  ASSERT_EQ(c->spend.budgets.size(), 2u);
  EXPECT_EQ(c->spend.budgets[0].monthly, 12'500'000);
  EXPECT_EQ(c->spend.budgets[0].daily, 1'000'000);
  EXPECT_EQ(c->spend.budgets[0].scope, BudgetConfig::Scope::kUpstream);
  EXPECT_EQ(c->spend.budgets[0].thresholds, std::vector<double>{0.9});
  EXPECT_EQ(c->spend.budgets[1].scope_name, "key-1a2b3c4d");
  EXPECT_DOUBLE_EQ(c->upstreams[0].price_cached_input_per_m, 0.15) << "cached input defaults to the input price";
  EXPECT_TRUE(c->cache.enabled);
  EXPECT_EQ(c->cache.max_bytes, 2u << 20);
  EXPECT_DOUBLE_EQ(c->cache.ttl_s, 30);
  const RouteConfig& r = c->routes[0];
  EXPECT_EQ(r.on_budget, RouteConfig::OnBudget::kRefuse);
  EXPECT_EQ(r.cache, RouteConfig::CacheMode::kAll);
  ASSERT_TRUE(r.canary.has_value());
  EXPECT_EQ(r.canary->target.Label(), "cloud:m2");
  EXPECT_EQ(r.canary->steps, (std::vector<double>{10, 100}));
  EXPECT_DOUBLE_EQ(r.canary->hold_s, 60);
  EXPECT_EQ(r.canary->min_requests, 5);
  EXPECT_TRUE(r.canary->shadow);
}

TEST(RouterConfig, SpendCacheAndCanaryMistakesAreNamed) {
  g_env = {};
  const std::string up = "[[upstream]]\nname='c'\nbase_url='http://x'\n";
  const std::string route = "[[route]]\nname='r'\ntargets=['c:m']\n";
  struct Case {
    std::string toml, expect;
  };
  const std::vector<Case> cases = {
      {"[spend]\nledger='mysql'\n", "ledger must be sqlite or postgres"},
      {"[spend]\nledger='postgres'\n", "needs postgres_url_env"},
      {"[spend]\nledger='postgres'\npostgres_url_env='NOPE'\n", "NOPE, which is not set"},
      {"[spend]\nalert_thresholds=[1.5]\n", "fractions in (0, 1]"},
      {"[spend]\nalert_webhook='ftp://x'\n", "alert_webhook must start with http"},
      {up + "[[budget]]\nname='b'\n", "needs monthly or daily"},
      {up + "[[budget]]\nname='b'\nmonthly=-1\n", "must not be negative"},
      {up + "[[budget]]\nname='b'\nmonthly=1\nscope='upstream:nope'\n", "names no [[upstream]]"},
      {up + "[[budget]]\nname='b'\nmonthly=1\nscope='tenant:acme'\n", "a client key's fingerprint"},
      {up + "[[budget]]\nname='b'\nmonthly=1\nscope='planet'\n", "scope must be global"},
      {up + "[[budget]]\nname='b'\nmonthly=1\n[[budget]]\nname='b'\ndaily=1\n", "defined twice"},
      {up + route + "on_budget_exceeded='panic'\n", "on_budget_exceeded must be"},
      {up + route + "cache='sometimes'\n", "cache must be deterministic, all or off"},
      {up + route + "canary={ target='nowhere:m' }\n", "names no [[upstream]] 'nowhere'"},
      {up + route + "canary={ target='c:m2', steps=[50, 20] }\n", "steps must rise"},
      {up + route + "canary={ target='c:m2', min_requests=0 }\n", "min_requests must be at least 1"},
      {up + route + "canary='c:m2'\n", "must be an inline table"},
      {"[cache]\nmax_bytes='lots'\n", "max_bytes"},
      {"[cache]\nmax_bytes=0\n", "at least 4096"},
      {up + "price_output_per_m=-2\n", "prices must not be negative"},
  };
  for (const Case& c : cases) {
    auto r = ParseRouterConfig(c.toml, "hone.toml", FakeEnv);
    ASSERT_FALSE(r.ok()) << c.toml;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << c.toml << "\n" << r.error().message;
  }
}

TEST(RouterConfig, ReplicasAndTheAffinityPolicy) {
  g_env = {};
  auto c = ParseRouterConfig(
      "[[upstream]]\nname='r1'\nbase_url='http://10.0.0.1:8080/v1'\nkind='hone'\n"
      "[[upstream]]\nname='r2'\nbase_url='http://10.0.0.2:8080/v1/'\nkind='hone'\n"
      "metrics_url='http://10.0.0.2:8081/metrics'\nload_interval='250ms'\n"
      "[[route]]\nname='support'\ntargets=['r1:qwen','r2:qwen']\npolicy='affinity'\n"
      "[[route]]\nname='rr'\ntargets=['r1:qwen','r2:qwen']\npolicy='round_robin'\n",
      "hone.toml", FakeEnv);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->upstreams.size(), 2u);
  EXPECT_TRUE(c->upstreams[0].replica);
  EXPECT_EQ(c->upstreams[0].metrics_url, "http://10.0.0.1:8080/metrics");  // the origin's /metrics
  EXPECT_EQ(c->upstreams[0].load_interval_s, 1);
  EXPECT_EQ(c->upstreams[1].metrics_url, "http://10.0.0.2:8081/metrics");
  EXPECT_EQ(c->upstreams[1].load_interval_s, 0.25);
  // A replica's wait between its role chunk and first token is a first-byte wait.
  EXPECT_EQ(c->upstreams[0].idle_timeout_s, c->upstreams[0].first_byte_timeout_s);
  EXPECT_EQ(c->routes[0].policy, Policy::kAffinity);
  EXPECT_EQ(c->routes[1].policy, Policy::kRoundRobin);
  EXPECT_STREQ(PolicyName(Policy::kAffinity), "affinity");
}

}  // namespace
}  // namespace hone::route
