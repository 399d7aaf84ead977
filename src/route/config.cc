#include "route/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "serve/config.h"
#include "util/units.h"

namespace hone::route {
namespace {

Error Bad(const std::string& where, const std::string& what) {
  return MakeError(ErrorCode::kInvalidArgument, where + ": " + what);
}

// A duration key: a string with a unit, or a number of seconds.
Status GetSeconds(const toml::table& t, const char* key, const std::string& where, double* out) {
  const toml::node* n = t.get(key);
  if (!n) return {};
  if (auto num = n->value<double>()) {
    *out = *num;
  } else if (auto s = n->value<std::string>()) {
    auto v = ParseDuration(*s);
    if (!v) return Bad(where, std::string(key) + ": " + v.error().message);
    *out = *v;
  } else {
    return Bad(where, std::string(key) + " must be a duration like \"30s\"");
  }
  if (*out < 0) return Bad(where, std::string(key) + " must not be negative");
  const std::string k = key;
  if (*out == 0 && k.find("timeout") != std::string::npos)
    return Bad(where, k + " must be more than 0 (a timeout of 0 would end every request at once)");
  return {};
}

template <class T>
Status Get(const toml::table& t, const char* key, const std::string& where, T* out) {
  const toml::node* n = t.get(key);
  if (!n) return {};
  if (auto v = n->value<T>()) {
    *out = *v;
    return {};
  }
  return Bad(where, std::string(key) + " has the wrong type");
}

Status ReadKeys(const toml::table& t, const std::string& where,
                const std::function<const char*(const char*)>& getenv, std::vector<std::string>* keys) {
  if (const toml::array* a = t["api_keys"].as_array()) {
    for (const auto& e : *a)
      if (auto s = e.value<std::string>()) keys->push_back(*s);
  }
  if (const toml::node* n = t.get("api_keys_env")) {
    std::vector<std::string> names;
    if (auto s = n->value<std::string>()) names.push_back(*s);
    if (const toml::array* a = n->as_array())
      for (const auto& e : *a)
        if (auto s = e.value<std::string>()) names.push_back(*s);
    for (const std::string& name : names) {
      const char* v = getenv(name.c_str());
      if (!v || !*v) return Bad(where, "api_keys_env names " + name + ", which is not set");
      keys->push_back(v);
    }
  }
  if (auto file = t["api_keys_file"].value<std::string>()) {
    std::ifstream in(*file);
    if (!in) return Bad(where, "api_keys_file " + *file + " cannot be read");
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (!line.empty() && line[0] != '#') keys->push_back(line);
    }
  }
  return {};
}

Result<UpstreamConfig> ReadUpstream(const toml::table& t, const std::string& where,
                                    const std::function<const char*(const char*)>& getenv) {
  UpstreamConfig u;
  if (Status s = Get(t, "name", where, &u.name); !s) return s.error();
  if (u.name.empty()) return Bad(where, "name is required");
  if (u.name == "local") return Bad(where, "\"local\" names hone's own models and cannot be an upstream");
  const std::string at = where + " '" + u.name + "'";
  if (Status s = Get(t, "base_url", at, &u.base_url); !s) return s.error();
  if (u.base_url.rfind("http://", 0) != 0 && u.base_url.rfind("https://", 0) != 0)
    return Bad(at, "base_url must start with http:// or https://");
  while (!u.base_url.empty() && u.base_url.back() == '/') u.base_url.pop_back();
  if (Status s = ReadKeys(t, at, getenv, &u.keys); !s) return s.error();
  if (const toml::table* m = t["models"].as_table()) {
    for (const auto& [k, v] : *m) {
      auto name = v.value<std::string>();
      if (!name) return Bad(at, "models must map names to names");
      u.models[std::string(k.str())] = *name;
    }
  }
  for (Status s : {GetSeconds(t, "connect_timeout", at, &u.connect_timeout_s),
                   GetSeconds(t, "first_byte_timeout", at, &u.first_byte_timeout_s),
                   GetSeconds(t, "idle_timeout", at, &u.idle_timeout_s),
                   GetSeconds(t, "total_timeout", at, &u.total_timeout_s),
                   GetSeconds(t, "health_interval", at, &u.health_interval_s),
                   GetSeconds(t, "load_interval", at, &u.load_interval_s)}) {
    if (!s) return s.error();
  }
  int64_t max_concurrent = u.max_concurrent;
  for (Status s :
       {Get(t, "max_concurrent", at, &max_concurrent), Get(t, "health_path", at, &u.health_path),
        Get(t, "price_input_per_m", at, &u.price_input_per_m),
        Get(t, "price_cached_input_per_m", at, &u.price_cached_input_per_m),
        Get(t, "price_output_per_m", at, &u.price_output_per_m), Get(t, "continuation", at, &u.continuation),
        Get(t, "ca_file", at, &u.ca_file), Get(t, "metrics_url", at, &u.metrics_url)}) {
    if (!s) return s.error();
  }
  std::string kind = "openai";
  if (Status s = Get(t, "kind", at, &kind); !s) return s.error();
  if (kind != "openai" && kind != "hone") return Bad(at, "kind must be openai or hone, not '" + kind + "'");
  u.replica = kind == "hone";
  if (!u.replica && !u.metrics_url.empty()) return Bad(at, "metrics_url needs kind = \"hone\"");
  if (u.load_interval_s < 0.05) return Bad(at, "load_interval must be at least 50ms");
  // A replica sends its role chunk at once and the first token after its
  // queue and prefill: the wait between the two is a first-byte wait.
  if (u.replica && !t.contains("idle_timeout"))
    u.idle_timeout_s = std::max(u.idle_timeout_s, u.first_byte_timeout_s);
  if (u.replica && u.metrics_url.empty()) {
    // http://host:port/v1 -> http://host:port/metrics
    const size_t host = u.base_url.find("://") + 3;
    const size_t path = u.base_url.find('/', host);
    u.metrics_url = u.base_url.substr(0, path) + "/metrics";
  }
  if (max_concurrent < 1) return Bad(at, "max_concurrent must be at least 1");
  if (u.price_input_per_m < 0 || u.price_output_per_m < 0) return Bad(at, "prices must not be negative");
  if (u.price_cached_input_per_m < 0) u.price_cached_input_per_m = u.price_input_per_m;
  u.max_concurrent = static_cast<int>(max_concurrent);
  if (!u.health_path.empty() && u.health_path[0] != '/') u.health_path = "/" + u.health_path;
  if (const toml::table* b = t["breaker"].as_table()) {
    int64_t n = u.breaker.consecutive_failures, v = u.breaker.min_volume;
    for (Status s : {Get(*b, "consecutive_failures", at + " breaker", &n),
                     Get(*b, "failure_rate", at + " breaker", &u.breaker.failure_rate),
                     Get(*b, "min_volume", at + " breaker", &v),
                     GetSeconds(*b, "window", at + " breaker", &u.breaker.window_s),
                     GetSeconds(*b, "cooldown", at + " breaker", &u.breaker.cooldown_s)}) {
      if (!s) return s.error();
    }
    u.breaker.consecutive_failures = static_cast<int>(n);
    u.breaker.min_volume = static_cast<int>(v);
  }
  return u;
}

Status ReadTargets(const toml::array& targets, const std::string& at, const std::set<std::string>& ups,
                   std::vector<Target>* out) {
  for (const auto& e : targets) {
    auto s = e.value<std::string>();
    size_t colon = s ? s->find(':') : std::string::npos;
    if (!s || colon == std::string::npos || colon == 0 || colon + 1 == s->size())
      return Bad(at, "a target must look like \"local:MODEL\" or \"UPSTREAM:MODEL\"");
    Target tg{s->substr(0, colon), s->substr(colon + 1)};
    if (!tg.local() && !ups.count(tg.upstream))
      return Bad(at, "target " + *s + " names no [[upstream]] '" + tg.upstream + "'");
    out->push_back(tg);
  }
  return {};
}

// A route's canary = { target = "...", steps = [...], hold, min_requests, ... }.
Result<CanaryConfig> ReadCanary(const toml::node& cn, const std::string& where_c,
                                const std::set<std::string>& ups) {
  const toml::table* ct = cn.as_table();
  if (!ct) return Bad(where_c, "must be an inline table { target = \"...\", steps = [5, 25, 50, 100], ... }");
  CanaryConfig k;
  std::string target;
  int64_t min_requests = k.min_requests;
  for (Status s :
       {Get(*ct, "target", where_c, &target), GetSeconds(*ct, "hold", where_c, &k.hold_s),
        Get(*ct, "min_requests", where_c, &min_requests),
        Get(*ct, "max_p99_ratio", where_c, &k.max_p99_ratio),
        Get(*ct, "max_error_rate", where_c, &k.max_error_rate), Get(*ct, "shadow", where_c, &k.shadow)}) {
    if (!s) return s.error();
  }
  const size_t colon = target.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size())
    return Bad(where_c, "target must look like \"local:MODEL\" or \"UPSTREAM:MODEL\"");
  k.target = {target.substr(0, colon), target.substr(colon + 1)};
  if (!k.target.local() && !ups.count(k.target.upstream))
    return Bad(where_c, "target " + target + " names no [[upstream]] '" + k.target.upstream + "'");
  if (const toml::array* steps = (*ct)["steps"].as_array()) {
    k.steps.clear();
    double last = 0;
    for (const auto& e : *steps) {
      auto v = e.value<double>();
      if (!v || *v <= last || *v > 100)
        return Bad(where_c, "steps must rise within (0, 100], like [5, 25, 50, 100]");
      k.steps.push_back(last = *v);
    }
    if (k.steps.empty()) return Bad(where_c, "steps must not be empty");
  }
  if (min_requests < 1) return Bad(where_c, "min_requests must be at least 1");
  k.min_requests = static_cast<int>(min_requests);
  if (k.max_p99_ratio <= 0) return Bad(where_c, "max_p99_ratio must be positive");
  if (k.max_error_rate < 0 || k.max_error_rate > 1)
    return Bad(where_c, "max_error_rate must be within [0, 1]");
  return k;
}

// shared_system_prompts: a list of non-empty strings, on a route with a local target.
Status ReadSharedPrompts(const toml::table& t, const std::string& at, RouteConfig* r) {
  if (const toml::node* sp = t.get("shared_system_prompts")) {
    const toml::array* a = sp->as_array();
    if (!a) return Bad(at, "shared_system_prompts must be a list of strings");
    for (const auto& e : *a) {
      auto text = e.value<std::string>();
      if (!text || text->empty()) return Bad(at, "shared_system_prompts must be a list of non-empty strings");
      r->shared_system_prompts.push_back(*text);
    }
    const bool local =
        std::any_of(r->targets.begin(), r->targets.end(), [](const Target& x) { return x.local(); });
    if (!local && !r->shared_system_prompts.empty())
      return Bad(at, "shared_system_prompts needs a local target (they warm the local prompt cache)");
  }
  return {};
}

Result<RouteConfig> ReadRoute(const toml::table& t, const std::string& where,
                              const std::set<std::string>& ups) {
  RouteConfig r;
  if (Status s = Get(t, "name", where, &r.name); !s) return s.error();
  if (r.name.empty()) return Bad(where, "name is required");
  const std::string at = where + " '" + r.name + "'";
  const toml::array* targets = t["targets"].as_array();
  if (!targets || targets->empty())
    return Bad(at, "targets must list at least one \"local:MODEL\" or \"UPSTREAM:MODEL\"");
  if (Status st = ReadTargets(*targets, at, ups, &r.targets); !st) return st.error();
  std::string policy = "local_first";
  if (Status s = Get(t, "policy", at, &policy); !s) return s.error();
  if (policy == "local_first")
    r.policy = Policy::kLocalFirst;
  else if (policy == "failover")
    r.policy = Policy::kFailover;
  else if (policy == "weighted")
    r.policy = Policy::kWeighted;
  else if (policy == "affinity")
    r.policy = Policy::kAffinity;
  else if (policy == "round_robin")
    r.policy = Policy::kRoundRobin;
  else
    return Bad(
        at, "policy must be local_first, failover, weighted, affinity or round_robin, not '" + policy + "'");
  if (Status s = GetSeconds(t, "ttft_slo", at, &r.ttft_slo_s); !s) return s.error();
  if (const toml::array* w = t["weights"].as_array()) {
    for (const auto& e : *w) {
      auto v = e.value<double>();
      if (!v || *v < 0) return Bad(at, "weights must be non-negative numbers");
      r.weights.push_back(*v);
    }
  }
  if (r.policy == Policy::kWeighted && r.weights.size() != r.targets.size())
    return Bad(at, "a weighted route needs one weight per target");
  if (const toml::table* rt = t["retry"].as_table()) {
    int64_t n = r.retry.max_attempts;
    for (Status s : {Get(*rt, "max_attempts", at + " retry", &n),
                     GetSeconds(*rt, "base_backoff", at + " retry", &r.retry.base_backoff_s),
                     GetSeconds(*rt, "max_backoff", at + " retry", &r.retry.max_backoff_s),
                     GetSeconds(*rt, "deadline", at + " retry", &r.retry.deadline_s)}) {
      if (!s) return s.error();
    }
    if (n < 1) return Bad(at, "retry.max_attempts must be at least 1");
    r.retry.max_attempts = static_cast<int>(n);
  }
  std::string cache = "deterministic";
  if (Status s = Get(t, "cache", at, &cache); !s) return s.error();
  if (cache == "deterministic")
    r.cache = RouteConfig::CacheMode::kDeterministic;
  else if (cache == "all")
    r.cache = RouteConfig::CacheMode::kAll;
  else if (cache == "off")
    r.cache = RouteConfig::CacheMode::kOff;
  else
    return Bad(at, "cache must be deterministic, all or off, not '" + cache + "'");
  if (const toml::node* cn = t.get("canary")) {
    auto k = ReadCanary(*cn, at + " canary", ups);
    if (!k) return k.error();
    r.canary = *k;
  }
  if (Status st = ReadSharedPrompts(t, at, &r); !st) return st.error();
  std::string on_budget = "local_only";
  if (Status s = Get(t, "on_budget_exceeded", at, &on_budget); !s) return s.error();
  if (on_budget == "local_only")
    r.on_budget = RouteConfig::OnBudget::kLocalOnly;
  else if (on_budget == "refuse")
    r.on_budget = RouteConfig::OnBudget::kRefuse;
  else
    return Bad(at, "on_budget_exceeded must be local_only or refuse, not '" + on_budget + "'");
  return r;
}

int64_t Micro(double money) { return static_cast<int64_t>(std::llround(money * 1e6)); }

Status ReadThresholds(const toml::table& t, const std::string& at, std::vector<double>* out) {
  const toml::node* n = t.get("alert_thresholds");
  if (!n) return {};
  const toml::array* a = n->as_array();
  if (!a) return Bad(at, "alert_thresholds must be a list of fractions like [0.5, 0.8, 0.95]");
  out->clear();
  for (const auto& e : *a) {
    auto v = e.value<double>();
    if (!v || *v <= 0 || *v > 1) return Bad(at, "alert_thresholds must be fractions in (0, 1]");
    out->push_back(*v);
  }
  return {};
}

Status ReadSpend(const toml::table& root, const std::string& origin, const std::set<std::string>& ups,
                 const std::function<const char*(const char*)>& getenv, SpendConfig* out) {
  std::vector<double> thresholds = {0.5, 0.8, 0.95};
  if (const toml::table* t = root["spend"].as_table()) {
    const std::string at = "config " + origin + ": [spend]";
    int64_t reserve = out->reserve_max_tokens;
    for (Status s :
         {Get(*t, "ledger", at, &out->ledger), Get(*t, "postgres_url_env", at, &out->postgres_url_env),
          Get(*t, "timezone", at, &out->timezone),
          GetSeconds(*t, "reservation_ttl", at, &out->reservation_ttl_s),
          Get(*t, "reserve_max_tokens", at, &reserve), Get(*t, "alert_webhook", at, &out->alert_webhook),
          Get(*t, "local_price_input_per_m", at, &out->local_price_input_per_m),
          Get(*t, "local_price_output_per_m", at, &out->local_price_output_per_m),
          ReadThresholds(*t, at, &thresholds)}) {
      if (!s) return s;
    }
    if (out->ledger != "sqlite" && out->ledger != "postgres")
      return Bad(at, "ledger must be sqlite or postgres, not '" + out->ledger + "'");
    if (out->ledger == "postgres") {
      if (out->postgres_url_env.empty())
        return Bad(at,
                   "a postgres ledger needs postgres_url_env, the variable that holds its connection string");
      const char* v = getenv(out->postgres_url_env.c_str());
      if (!v || !*v) return Bad(at, "postgres_url_env names " + out->postgres_url_env + ", which is not set");
      out->postgres_url = v;
    }
    if (reserve < 1) return Bad(at, "reserve_max_tokens must be at least 1");
    out->reserve_max_tokens = static_cast<int>(reserve);
    if (out->reservation_ttl_s < 1) return Bad(at, "reservation_ttl must be at least 1s");
    if (out->timezone.empty() || out->timezone.find("..") != std::string::npos)
      return Bad(at, "timezone must name a zone like \"UTC\" or \"Asia/Shanghai\"");
    if (!out->alert_webhook.empty() && out->alert_webhook.rfind("http://", 0) != 0 &&
        out->alert_webhook.rfind("https://", 0) != 0)
      return Bad(at, "alert_webhook must start with http:// or https://");
  }
  std::set<std::string> names;
  if (const toml::array* bs = root["budget"].as_array()) {
    int i = 0;
    for (const auto& e : *bs) {
      const toml::table* bt = e.as_table();
      const std::string where = "config " + origin + ": [[budget]] #" + std::to_string(++i);
      if (!bt) return Bad(where, "must be a table");
      BudgetConfig b;
      b.thresholds = thresholds;
      std::string scope = "global";
      double monthly = 0, daily = 0;
      if (Status s = Get(*bt, "name", where, &b.name); !s) return s;
      if (b.name.empty()) return Bad(where, "name is required");
      const std::string at = where + " '" + b.name + "'";
      for (Status s : {Get(*bt, "scope", at, &scope), Get(*bt, "monthly", at, &monthly),
                       Get(*bt, "daily", at, &daily), ReadThresholds(*bt, at, &b.thresholds)}) {
        if (!s) return s;
      }
      if (monthly < 0 || daily < 0) return Bad(at, "monthly and daily must not be negative");
      if (monthly == 0 && daily == 0) return Bad(at, "a budget needs monthly or daily (or both)");
      b.monthly = Micro(monthly);
      b.daily = Micro(daily);
      if (scope == "global") {
        b.scope = BudgetConfig::Scope::kGlobal;
      } else if (scope.rfind("upstream:", 0) == 0) {
        b.scope = BudgetConfig::Scope::kUpstream;
        b.scope_name = scope.substr(9);
        if (!ups.count(b.scope_name)) return Bad(at, "scope " + scope + " names no [[upstream]]");
      } else if (scope.rfind("tenant:", 0) == 0) {
        b.scope = BudgetConfig::Scope::kTenant;
        b.scope_name = scope.substr(7);
        if (b.scope_name.rfind("key-", 0) != 0)
          return Bad(at,
                     "a tenant is a client key's fingerprint, \"tenant:key-1a2b3c4d\" (see docs/route.md)");
      } else {
        return Bad(at, "scope must be global, upstream:NAME or tenant:key-FINGERPRINT, not '" + scope + "'");
      }
      if (!names.insert(b.name).second) return Bad(where, "budget '" + b.name + "' is defined twice");
      out->budgets.push_back(std::move(b));
    }
  }
  return {};
}

}  // namespace

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kLocalFirst:
      return "local_first";
    case Policy::kFailover:
      return "failover";
    case Policy::kWeighted:
      return "weighted";
    case Policy::kAffinity:
      return "affinity";
    case Policy::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

Result<RouterConfig> ParseRouterConfig(const std::string& text, const std::string& origin,
                                       const std::function<const char*(const char*)>& getenv) {
  toml::table t;
  try {
    t = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream why;
    why << e.description() << " (line " << e.source().begin.line << ")";
    return Bad("config " + origin, why.str());
  }
  RouterConfig c;
  std::set<std::string> names;
  if (const toml::array* ups = t["upstream"].as_array()) {
    int i = 0;
    for (const auto& e : *ups) {
      const toml::table* ut = e.as_table();
      const std::string where = "config " + origin + ": [[upstream]] #" + std::to_string(++i);
      if (!ut) return Bad(where, "must be a table");
      auto u = ReadUpstream(*ut, where, getenv);
      if (!u) return u.error();
      if (!names.insert(u->name).second) return Bad(where, "upstream '" + u->name + "' is defined twice");
      c.upstreams.push_back(std::move(*u));
    }
  }
  std::set<std::string> routes;
  if (const toml::array* rs = t["route"].as_array()) {
    int i = 0;
    for (const auto& e : *rs) {
      const toml::table* rt = e.as_table();
      const std::string where = "config " + origin + ": [[route]] #" + std::to_string(++i);
      if (!rt) return Bad(where, "must be a table");
      auto r = ReadRoute(*rt, where, names);
      if (!r) return r.error();
      if (!routes.insert(r->name).second) return Bad(where, "route '" + r->name + "' is defined twice");
      c.routes.push_back(std::move(*r));
    }
  }
  if (Status s = ReadSpend(t, origin, names, getenv, &c.spend); !s) return s.error();
  if (const toml::table* ct = t["cache"].as_table()) {
    const std::string at = "config " + origin + ": [cache]";
    c.cache.enabled = true;
    if (Status s = Get(*ct, "enabled", at, &c.cache.enabled); !s) return s.error();
    if (Status s = GetSeconds(*ct, "ttl", at, &c.cache.ttl_s); !s) return s.error();
    if (const toml::node* n = ct->get("max_bytes")) {
      if (auto i = n->value<int64_t>()) {
        if (*i < 4096) return Bad(at, "max_bytes must be at least 4096");
        c.cache.max_bytes = static_cast<uint64_t>(*i);
      } else if (auto str = n->value<std::string>()) {
        auto b = ParseSize(*str);
        if (!b) return Bad(at, "max_bytes: " + b.error().message);
        if (*b < 4096) return Bad(at, "max_bytes must be at least 4096");
        c.cache.max_bytes = *b;
      } else {
        return Bad(at, "max_bytes must be a size like \"64M\"");
      }
    }
    if (c.cache.ttl_s <= 0) return Bad(at, "ttl must be more than 0");
  }
  return c;
}

Result<RouterConfig> LoadRouterConfig(const std::string& path,
                                      const std::function<const char*(const char*)>& getenv) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "config " + path + " cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return ParseRouterConfig(s.str(), path, getenv);
}

}  // namespace hone::route
