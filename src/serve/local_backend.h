// The local engine as a Backend: leases the model from the pool (loading it
// when needed), renders the prompt with the model's chat template, and queues
// one Job per prompt on the model's scheduler. The Completion it returns reads
// those jobs in order and holds the lease until it is destroyed, so the model
// is never evicted under a request.
#pragma once

#include <memory>
#include <vector>

#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "serve/contract_names.h"
#include "serve/chat_prompt.h"
#include "serve/metrics.h"
#include "serve/model_pool.h"

namespace hone::serve {

// A chat that Predict rendered and tokenized for one resident model. The
// router hands it back to Start, so a request it forecasts and then starts
// renders its template once, not twice (a render is milliseconds of Jinja,
// and the route's admission lock is held across both).
struct PreparedPrompt {
  std::weak_ptr<const LoadedModel> model;  // the instance it was rendered for
  ChatPrompt chat;
};

class LocalBackend final : public Backend {
 public:
  // request_timeout_s bounds every generation and embedding from the moment it
  // is queued; threads is for the embedding session.
  LocalBackend(ModelPool& pool, Metrics& metrics, double request_timeout_s, int threads)
      : pool_(pool), metrics_(metrics), timeout_s_(request_timeout_s), threads_(threads) {}

  // Errors: those of ModelPool::Acquire, kInvalidArgument (empty messages or
  // prompt, bad sampling values, a schema that cannot be enforced), kBusy with
  // retry_after_s = 1 (the model's queue is full), kUnavailable (the model is
  // unloading).
  Result<std::unique_ptr<Completion>> Start(const GenerationRequest& request) override;
  // The same, with the prompt a Predict of this request prepared (used only
  // when the model it names is the instance leased now; otherwise, or when
  // null, the chat is rendered here).
  Result<std::unique_ptr<Completion>> Start(const GenerationRequest& request,
                                            std::shared_ptr<const PreparedPrompt> prepared);
  // Errors: those of Acquire, kInvalidArgument (an empty or too long text),
  // kTimeout (past the request timeout), kAborted (cancelled).
  Result<Embeddings> Embed(const EmbeddingRequest& request, const std::function<bool()>& cancelled) override;
  // Every registry name and alias, with details from the GGUF header.
  std::vector<ModelCard> ListModels() override;
  Result<backend::Loaded> Load(const std::string& model, std::optional<double> keep_alive_s) override;
  // Errors: those of Acquire and of RenderChat, kInvalidArgument (nothing to count).
  Result<int> CountPromptTokens(const GenerationRequest& request) override;

  // What the router weighs before sending a request here (route/router.h).
  struct Forecast {
    bool known = false;   // the name is in the registry
    bool loaded = false;  // resident now; if not, ttft_s includes an estimated load
    LoadForecast load;    // from the model's scheduler (ttft_s is the total)
    double embed_s = 0;   // of load.ttft_s: embeddings sharing the cores meanwhile
    // A resident model's chat, rendered and tokenized for the forecast: pass
    // it to Start(request, prepared). Null otherwise.
    std::shared_ptr<const PreparedPrompt> prepared;
  };
  Forecast Predict(const GenerationRequest& request);
  // The same for an embedding request: when its vectors would be ready, from
  // the embedding work ahead on the model, this request's tokens, the
  // measured rate, and whether generation shares the cores.
  struct EmbedForecast {
    bool known = false;
    bool loaded = false;      // if not, seconds includes an estimated load
    bool queue_full = false;  // Embed would answer kBusy now
    int tokens = 0;           // this request's
    long tokens_ahead = 0;    // waiting or running before it
    double seconds = 0;
  };
  EmbedForecast PredictEmbed(const EmbeddingRequest& request);
  // Tokens of `text` under `model`'s tokenizer, if that model is resident
  // (no load for a count); nullopt otherwise.
  std::optional<int> CountTokens(const std::string& model, const std::string& text);

  // The engine's sampling options for a request: its defaults, the request's
  // values over them, and a grammar for the response format.
  static Result<engine::SamplingOptions> SamplingFor(const Sampling& s, const ResponseFormat& format);

 private:
  ModelPool& pool_;
  Metrics& metrics_;
  const double timeout_s_;
  const int threads_;
};

}  // namespace hone::serve
