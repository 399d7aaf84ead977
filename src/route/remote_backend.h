// One OpenAI-compatible upstream as a Backend: chat completions (and single
// prompt completions, embeddings, the model list) over the shared HttpClient,
// with this upstream's keys, circuit breaker and concurrency cap. One Start is
// one attempt: retries, key rotation after a refusal, and moving on to the
// next target are the router's decisions (router.h), made from the error codes
// this returns.
#pragma once

#include <atomic>
#include <memory>

#include "route/breaker.h"
#include "route/config.h"
#include "route/http_client.h"
#include "route/key_queue.h"
#include "route/keyring.h"
#include "route/retry.h"
#include "backend/backend.h"

namespace hone::route {

// Details of a refused attempt that the router acts on, beyond the Error.
struct AttemptInfo {
  Outcome outcome = Outcome::kOk;
  int http_status = 0;
  std::string key_fingerprint;
  // No key was sent: the request waited in the key queue until the deadline
  // (kRateLimited, with the queue's Retry-After) or every key is revoked.
  bool no_key = false;
};

class RemoteBackend final : public backend::Backend {
 public:
  RemoteBackend(UpstreamConfig config, HttpClient& http);

  // Waits in the upstream's key queue for a usable key (key_queue.h), in
  // `ticket`'s place (kept across a request's attempts; null: a place of
  // its own), then sends the request and waits for the upstream's status
  // (at most the first-byte timeout). Errors: kBusy (at max_concurrent),
  // kUnavailable (every key revoked), kRateLimited (a 429, or no key before
  // the deadline), kUpstream (5xx, connect, broken), kTimeout,
  // kInvalidArgument (the upstream said 4xx: the request is wrong, do not
  // retry). `info` says what happened. `deadline` (the route's) bounds the
  // wait for a key and for the status; a request whose `cancelled` turns
  // true stops waiting with kAborted.
  Result<std::unique_ptr<backend::Completion>> StartAttempt(
      const backend::GenerationRequest& r, AttemptInfo* info,
      backend::Clock::time_point deadline = backend::Clock::time_point::max(), KeyQueue::Ticket* ticket = nullptr);
  Result<std::unique_ptr<backend::Completion>> Start(const backend::GenerationRequest& r) override {
    AttemptInfo info;
    return StartAttempt(r, &info);
  }
  Result<backend::Embeddings> Embed(const backend::EmbeddingRequest& r,
                                  const std::function<bool()>& cancelled) override;
  std::vector<backend::ModelCard> ListModels() override;
  Result<backend::Loaded> Load(const std::string& model, std::optional<double> keep_alive_s) override;

  // GET base_url + health_path (a models list, never a billed completion).
  Status CheckHealth();
  // kind = "hone": GET metrics_url (with a key, for a replica's API port),
  // within 2 s; an error names the HTTP status or why it failed.
  Result<std::string> FetchMetrics();

  const UpstreamConfig& config() const { return config_; }
  // A config reload: the upstream's keys again, revoked and cooling ones usable.
  void ReloadKeys(std::vector<std::string> keys) { keys_.Replace(std::move(keys)); }
  Breaker& breaker() { return breaker_; }
  KeyRing& keys() { return keys_; }
  KeyQueue& key_queue() { return queue_; }
  int in_flight() const { return in_flight_.load(); }
  std::string UpstreamModel(const std::string& model) const;

 private:
  HttpSpec Spec(const std::string& path, const std::string& body, const std::string& key,
                const std::string& ledger_id = "") const;
  // An attempt's call that gave no status: a timeout or a failed connect
  // (the breaker counts it unless the route's deadline cut it short).
  Error NoAnswer(HttpCall& call, AttemptInfo* info, Clock::time_point start, Clock::time_point route_deadline);
  // An attempt answered with a non-2xx status: the error it means, the
  // upstream's own message read from its body.
  Error Refusal(HttpCall& call, int status, Outcome outcome, int retry_after);

  const UpstreamConfig config_;
  HttpClient& http_;
  Breaker breaker_;
  KeyRing keys_;
  KeyQueue queue_;  // over keys_
  std::shared_ptr<std::atomic<int>> in_flight_count_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<int>& in_flight_ = *in_flight_count_;
};

// The request as an OpenAI chat-completions (or completions) body, streamed
// with usage. Exposed for tests.
std::string OpenAiBody(const backend::GenerationRequest& r, const std::string& upstream_model,
                       bool continuation);

}  // namespace hone::route
