// What both APIs share: one internal request struct that OpenAI and Ollama
// JSON are translated into, and the steps to run it (lease the model, render
// the prompt with the model's chat template, queue jobs on its scheduler).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "serve/errors.h"
#include "serve/metrics.h"
#include "serve/model_pool.h"

namespace hone::serve {

struct GenRequest {
  std::string model;
  bool chat = false;
  std::vector<engine::ChatMessage> messages;  // chat
  std::vector<std::string> prompts;           // completion: one job per prompt
  bool raw = false;                           // completion text goes in as is (no BOS)
  int max_tokens = -1;
  engine::SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  std::optional<double> keep_alive_s;
  std::function<bool()> client_gone = [] { return false; };  // from HttpRequest
};

// A started request: holds the model lease until the last byte is sent.
struct Running {
  std::unique_ptr<Lease> lease;
  std::vector<std::shared_ptr<Job>> jobs;
  std::string model;
  double load_seconds = 0;  // 0 when the model was already resident
  Clock::time_point start = Clock::now();
  std::function<bool()> client_gone = [] { return false; };
  ~Running();  // cancels jobs still running (a client gone, a handler error)
};

class Service {
 public:
  Service(ModelPool& pool, Metrics& metrics, double request_timeout_s, int threads)
      : pool_(pool), metrics_(metrics), timeout_s_(request_timeout_s), threads_(threads) {}

  // Null with *err set on failure (unknown model, bad prompt, queue full, ...).
  std::shared_ptr<Running> Start(const GenRequest& r, ApiFlavor flavor, ApiError* err);
  // Renders chat messages with the model's template (a plain transcript when the
  // model has none) and tokenizes.
  static Result<std::vector<engine::Token>> ChatPrompt(const engine::Model& model,
                                                       const std::vector<engine::ChatMessage>& messages);

  ModelPool& pool() { return pool_; }
  Metrics& metrics() { return metrics_; }
  int threads() const { return threads_; }

 private:
  ModelPool& pool_;
  Metrics& metrics_;
  double timeout_s_;
  int threads_;
};

}  // namespace hone::serve
