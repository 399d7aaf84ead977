#include "route/replica_picker.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hone::route {
namespace {

// Request bytes per token for the prefill estimate: ~4 for English with
// Qwen's and Llama's tokenizers (a Chinese character is 3 bytes and about
// one token). Only differences between replicas decide, so rough is enough.
constexpr double kBytesPerToken = 4;
// Until a replica has measured its prefill rate: a small model on a few cores.
constexpr double kDefaultPrefillTps = 500;
constexpr double kDefaultServiceS = 1;
// An unreachable or draining replica: after every reachable one.
constexpr double kUnreachableS = 1e6;
// A replica that has not loaded the model: its load time (measured there
// when it loaded it before, else this guess) comes first.
constexpr double kDefaultLoadS = 5;
// Estimates within this factor of the best one are ties (Order).
constexpr double kAlike = 1.25;

}  // namespace

bool ReplicaPicker::Update(const std::string& upstream, bool ok, const std::string& text_or_error) {
  ReplicaMetrics parsed;
  if (ok) parsed = ParseReplicaMetrics(text_or_error);
  std::map<std::string, ReplicaModelLoad>& fresh = parsed.models;
  std::lock_guard<std::mutex> lock(mu_);
  const bool known = replicas_.count(upstream) > 0;
  Replica& r = replicas_[upstream];
  const bool was = r.reachable;
  r.reachable = ok && !parsed.draining;
  r.error = !ok ? text_or_error : parsed.draining ? "draining (it refuses new requests)" : "";
  const bool changed = known ? was != r.reachable : !r.reachable;
  if (!ok) return changed;
  // A request's time in a slot (its latency less its wait for one), over the
  // requests that ended since the last scrape: the queue estimate's unit.
  for (auto& [model, load] : fresh) {
    auto old = r.models.find(model);
    const ReplicaModelLoad zero;
    const ReplicaModelLoad& prev = old != r.models.end() ? old->second : zero;
    const double n = load.e2e_count - prev.e2e_count;
    const double busy = (load.e2e_sum_s - prev.e2e_sum_s) - (load.queue_sum_s - prev.queue_sum_s);
    if (n > 0 && busy > 0) r.service_s[model] = busy / n;
  }
  r.models = std::move(fresh);
  return changed;
}

bool ReplicaPicker::Reachable(const std::string& upstream) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = replicas_.find(upstream);
  return it != replicas_.end() && it->second.reachable;
}

ReplicaPicker::Pending::Pending(ReplicaPicker* picker, std::string label, double tokens)
    : picker_(picker), label_(std::move(label)), tokens_(tokens) {
  std::lock_guard<std::mutex> lock(picker_->mu_);
  picker_->pending_[label_] += tokens_;
}

void ReplicaPicker::Pending::Release() {
  std::lock_guard<std::mutex> lock(picker_->mu_);
  if (tokens_ == 0) return;
  double& left = picker_->pending_[label_];
  left = std::max(0.0, left - tokens_);
  tokens_ = 0;
}

std::unique_ptr<ReplicaPicker::Pending> ReplicaPicker::AddPending(const std::string& label, const PromptBlocks& p) {
  const double matched = std::min<double>(index_.Match(label, p) * kPrefixBlockBytes, p.bytes);
  return std::make_unique<Pending>(this, label, (p.bytes - matched) / kBytesPerToken);
}

double ReplicaPicker::PendingTokens(const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(label);
  return it == pending_.end() ? 0 : it->second;
}

ReplicaPicker::Estimate ReplicaPicker::Predict(const Candidate& c, const PromptBlocks& p) const {
  Estimate e;
  e.matched_blocks = index_.Match(c.label, p);
  if (c.upstream.empty()) {
    e.ttft_s = c.local_ttft_s;  // the scheduler saw the real prefix cache
    return e;
  }
  ReplicaModelLoad load;
  double service = kDefaultServiceS;
  double pending = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto r = replicas_.find(c.upstream);
    if (r == replicas_.end() || !r->second.reachable) {
      e.ttft_s = kUnreachableS + c.in_flight;
      return e;
    }
    if (auto m = r->second.models.find(c.model); m != r->second.models.end()) load = m->second;
    if (auto s = r->second.service_s.find(c.model); s != r->second.service_s.end() && s->second > 0)
      service = s->second;
    if (auto it = pending_.find(c.label); it != pending_.end()) pending = it->second;
    // Not measured there yet (it has served nothing since it started): as
    // fast as the fastest replica that has, serving the same model. A fixed
    // guess made the first replica to measure look many times faster than
    // its idle peers, and a cold cluster then sent every new prefix to it.
    if (load.prefill_tps <= 0) {
      for (const auto& [name, other] : replicas_) {
        auto om = other.models.find(c.model);
        if (other.reachable && om != other.models.end()) load.prefill_tps = std::max(load.prefill_tps, om->second.prefill_tps);
      }
    }
  }
  // Not loaded there (never, or unloaded since): it loads the model first.
  const double cold = load.slots > 0 ? 0 : load.load_count > 0 ? load.load_sum_s / load.load_count : kDefaultLoadS;
  // The replica's forecast is as old as the last scrape; the requests this
  // router sent since are counted at once.
  const int slots = std::max(1, load.slots);
  const double busy = std::max(load.running + load.waiting, static_cast<double>(c.in_flight));
  const double queued = busy >= slots ? (busy - slots + 1) * service / slots : 0;
  const double wait = std::max(load.slot_wait_s, queued);
  const double tps = load.prefill_tps > 0 ? load.prefill_tps : kDefaultPrefillTps;
  const double matched = std::min<double>(e.matched_blocks * kPrefixBlockBytes, p.bytes);
  e.ttft_s = cold + wait + (pending + (p.bytes - matched) / kBytesPerToken) / tps;
  return e;
}

std::vector<size_t> ReplicaPicker::Order(const std::vector<Candidate>& cs, const PromptBlocks& p,
                                         uint64_t rotation) const {
  std::vector<size_t> order(cs.size());
  std::iota(order.begin(), order.end(), 0);
  if (cs.empty()) return order;
  std::rotate(order.begin(), order.begin() + rotation % cs.size(), order.end());
  std::vector<double> est(cs.size());
  for (size_t i = 0; i < cs.size(); ++i)
    est[i] = cs[i].excluded ? 4 * kUnreachableS : std::clamp(Predict(cs[i], p).ttft_s, 0.0, 2 * kUnreachableS);
  // Within a quarter of the best estimate (and a millisecond), targets are
  // alike: replicas whose measured prefill rates differ by noise must not
  // draw every new prefix to the one that measured fastest. Alike ones keep
  // the rotation's order, ahead of the rest by estimate. A cached prefix
  // saves far more than a quarter, so it still decides.
  const double best = *std::min_element(est.begin(), est.end());
  auto alike = [&](size_t i) { return est[i] <= best * kAlike + 0.001; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (alike(a) || alike(b)) return alike(a) && !alike(b);
    return est[a] < est[b];
  });
  return order;
}

nlohmann::json ReplicaPicker::Json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, r] : replicas_) {
    nlohmann::json models = nlohmann::json::object();
    for (const auto& [model, l] : r.models) {
      models[model] = {{"waiting", l.waiting},         {"running", l.running},
                       {"kv_cache_usage", l.kv_usage}, {"slots", l.slots},
                       {"slot_wait_s", l.slot_wait_s}, {"prefill_tokens_per_s", l.prefill_tps}};
      if (auto s = r.service_s.find(model); s != r.service_s.end()) models[model]["mean_slot_time_s"] = s->second;
    }
    out[name] = {{"reachable", r.reachable}, {"models", models}};
    if (!r.error.empty()) out[name]["error"] = r.error;
  }
  return out;
}

}  // namespace hone::route
