#include "serve/local_backend.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <nlohmann/json.hpp>

#include "serve/chat_prompt.h"
#include "serve/job.h"
#include "serve/json_grammar.h"

namespace hone::serve {
namespace {

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// How a job's end reads to a caller. Failure classification happens here,
// once: a timeout is kTimeout; a job the server stopped (the model unloaded
// under it) or that failed is kInternal.
ChoiceResult ChoiceResultOf(const JobResult& r) {
  ChoiceResult c;
  c.usage = {r.prompt_tokens, r.cached_tokens, r.completion_tokens, r.draft_tokens, r.accepted_tokens};
  c.queue_s = r.timings.queue_seconds();
  c.prompt_s = r.timings.prompt_seconds();
  c.generation_s = r.timings.gen_seconds();
  if (r.timings.first_token != Clock::time_point{}) {
    c.ttft_s = std::chrono::duration<double>(r.timings.first_token - r.timings.enqueued).count();
  }
  c.finish = r.finish == Finish::kNone ? FinishReason::kError : r.finish;
  if (c.finish == FinishReason::kStop) c.stop_sequence = r.stop_sequence;
  switch (c.finish) {
    case FinishReason::kNone:
    case FinishReason::kStop:
    case FinishReason::kLength:
    case FinishReason::kToolCalls:
      break;
    case FinishReason::kTimeout:
      c.error = MakeError(ErrorCode::kTimeout, r.error);
      break;
    case FinishReason::kCancelled:
      c.error = MakeError(ErrorCode::kInternal, r.error.empty() ? "generation was cancelled" : r.error);
      break;
    case FinishReason::kError:
      c.error = MakeError(ErrorCode::kInternal, r.error.empty() ? "generation failed" : r.error);
      break;
  }
  return c;
}

// The jobs of one request, read in order. Owns the lease: the model stays
// resident until the reader is gone. With tools in play each job's text goes
// through the chat library's parser, which splits it into content and tool
// call pieces (engine/chat.h).
class LocalCompletion final : public Completion {
 public:
  LocalCompletion(std::unique_ptr<Lease> lease, std::vector<std::string> client_stops)
      : lease_(std::move(lease)),
        model_((*lease_)->name),
        load_seconds_(lease_->just_loaded ? (*lease_)->load_seconds : 0),
        client_stops_(std::move(client_stops)) {}
  // Jobs still queued or running stop at the scheduler's next step.
  ~LocalCompletion() override { Cancel(); }

  void Add(std::shared_ptr<Job> job, std::unique_ptr<engine::ChatOutputParser> parser) {
    jobs_.push_back(std::move(job));
    parsers_.push_back(std::move(parser));
  }

  CompletionEvent Next(Clock::time_point deadline) override {
    if (!pending_.empty()) return Pop();
    CompletionEvent e;
    if (next_ >= jobs_.size()) return e.kind = CompletionEvent::Kind::kDone, e;
    Job& job = *jobs_[next_];
    engine::ChatOutputParser* parser = parsers_[next_].get();
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    bool done = false;
    const std::string text = job.Take(std::max(wait, std::chrono::milliseconds(0)), &done);
    if (!text.empty()) {
      if (parser) {
        QueueDeltas(parser->Push(text));
        // One call was asked for and it is whole: stop the model here.
        if (parser->complete() && !job.cancelled()) {
          job.Cancel();
          call_complete_ = true;
        }
      } else {
        Queue(CompletionEvent{CompletionEvent::Kind::kText, next_, text, {}, {}});
      }
    }
    if (done) {
      ChoiceResult r = ChoiceResultOf(job.result());
      // A stop string of the chat format's own is no stop sequence of the client's.
      if (std::find(client_stops_.begin(), client_stops_.end(), r.stop_sequence) == client_stops_.end())
        r.stop_sequence.clear();
      if (parser) {
        QueueDeltas(parser->Finish());
        // The call is whole: that is how the turn ended, even when this
        // reader stopped the job or the last allowed token closed it.
        if (parser->complete() &&
            (r.finish == FinishReason::kCancelled || r.finish == FinishReason::kLength) &&
            (call_complete_ || r.ok())) {
          r.finish = FinishReason::kStop;
          r.error.reset();
        }
        call_complete_ = false;
        // A call a stop string cut short is no finished call: "stop" then, as the text says.
        bool whole = !parser->tool_calls().empty();
        for (const auto& c : parser->tool_calls()) whole &= nlohmann::json::accept(c.arguments);
        if (whole && r.finish == FinishReason::kStop) {
          r.finish = FinishReason::kToolCalls;
          r.stop_sequence.clear();
        }
      }
      Queue(CompletionEvent{CompletionEvent::Kind::kChoiceEnd, next_, "", {}, std::move(r)});
      ++next_;
    }
    if (pending_.empty()) return e.kind = CompletionEvent::Kind::kIdle, e.choice = next_, e;
    return Pop();
  }

  void Cancel() override {
    for (auto& j : jobs_) j->Cancel();
  }
  size_t choices() const override { return jobs_.size(); }
  const std::string& model() const override { return model_; }
  double load_seconds() const override { return load_seconds_; }

 private:
  void Queue(CompletionEvent e) { pending_.push_back(std::move(e)); }
  void QueueDeltas(std::vector<engine::ChatOutputParser::Delta> deltas) {
    for (auto& d : deltas) {
      if (!d.content.empty()) Queue(CompletionEvent{CompletionEvent::Kind::kText, next_, d.content, {}, {}});
      if (d.tool_index < 0) continue;
      ToolCallDelta t{static_cast<size_t>(d.tool_index), d.tool_id, d.tool_name, d.arguments};
      Queue(CompletionEvent{CompletionEvent::Kind::kToolCall, next_, "", std::move(t), {}});
    }
  }
  CompletionEvent Pop() {
    CompletionEvent e = std::move(pending_.front());
    pending_.pop_front();
    return e;
  }

  std::unique_ptr<Lease> lease_;  // declared first: released after the jobs
  const std::string model_;
  const double load_seconds_;
  const std::vector<std::string> client_stops_;
  std::vector<std::shared_ptr<Job>> jobs_;
  std::vector<std::unique_ptr<engine::ChatOutputParser>> parsers_;  // null: plain text
  std::deque<CompletionEvent> pending_;  // events read from a job, not yet handed out
  size_t next_ = 0;                      // the choice being read
  bool call_complete_ = false;           // this reader stopped the current job after its call
};

}  // namespace

Result<engine::SamplingOptions> LocalBackend::SamplingFor(const Sampling& s, const ResponseFormat& format) {
  engine::SamplingOptions o;
  if (s.temperature) o.temperature = *s.temperature;
  if (s.top_p) o.top_p = *s.top_p;
  if (s.top_k) o.top_k = *s.top_k;
  if (s.min_p) o.min_p = *s.min_p;
  if (s.seed) o.seed = *s.seed;
  if (s.repeat_penalty) o.repeat_penalty = *s.repeat_penalty;
  if (s.repeat_last_n) o.repeat_last_n = *s.repeat_last_n;
  if (s.presence_penalty) o.presence_penalty = *s.presence_penalty;
  if (s.frequency_penalty) o.frequency_penalty = *s.frequency_penalty;
  switch (format.type) {
    case ResponseFormat::Type::kNone:
      break;
    case ResponseFormat::Type::kJsonObject:
      o.grammar = JsonObjectGrammar();
      break;
    case ResponseFormat::Type::kJsonSchema: {
      auto g = JsonSchemaGrammar(format.schema);
      if (!g) return g.error();
      o.grammar = std::move(*g);
      break;
    }
  }
  return o;
}

namespace {

// A cold load: the file from disk at ~1 GB/s, then the text at a modest
// rate (about 4 bytes a token); the first request pays for both.
double ColdSeconds(uint64_t file_bytes, int tokens) {
  return static_cast<double>(file_bytes) / 1e9 + 0.5 + tokens * 0.005;
}
int GuessTokens(size_t bytes) { return static_cast<int>(bytes / 4 + 1); }

}  // namespace

LocalBackend::Forecast LocalBackend::Predict(const GenerationRequest& r) {
  Forecast f;
  auto entry = pool_.registry().Resolve(r.model);
  if (!entry) return f;
  f.known = true;
  std::shared_ptr<LoadedModel> m = pool_.Peek(r.model);
  if (!m || !m->scheduler) {
    size_t bytes = 0;
    for (const Message& msg : r.messages) bytes += msg.content.size();
    for (const std::string& p : r.prompts) bytes += p.size();
    f.load.uncached_tokens = GuessTokens(bytes);
    f.load.ttft_s = ColdSeconds((*entry)->file_bytes, f.load.uncached_tokens);
    return f;
  }
  f.loaded = true;
  std::vector<engine::Token> prompt;
  const std::vector<engine::Token>* tokens = &prompt;
  if (r.chat) {
    auto p = RenderChat(*m->model, m->chat.get(), r);
    if (p) {
      auto prepared = std::make_shared<PreparedPrompt>();
      prepared->model = m;
      prepared->chat = std::move(*p);
      tokens = &prepared->chat.tokens;  // forecast on the prepared tokens, no copy
      f.prepared = std::move(prepared);
    }
  } else if (!r.prompts.empty()) {
    auto p = engine::Tokenizer(*m->model).Encode(r.prompts[0], !r.raw, true);
    if (p) prompt = std::move(*p);
  }
  f.load = m->scheduler->Forecast(*tokens, r.max_tokens, CacheScope(r.tenant, r.cache_salt));
  // Embeddings run beside the scheduler on the same cores: with fair
  // sharing, this request's first token waits for as much of that work as
  // it does of its own (work conservation), and no more.
  const auto e = m->embed_load(m->scheduler->options().max_queue);
  if (e.tokens_ahead > 0) {
    const double per_token = e.s_per_token > 0 ? e.s_per_token : 1.0 / f.load.prefill_tps;
    f.embed_s = std::min(e.tokens_ahead * per_token, f.load.ttft_s);
    f.load.ttft_s += f.embed_s;
  }
  return f;
}

LocalBackend::EmbedForecast LocalBackend::PredictEmbed(const EmbeddingRequest& r) {
  EmbedForecast f;
  auto entry = pool_.registry().Resolve(r.model);
  if (!entry) return f;
  f.known = true;
  std::shared_ptr<LoadedModel> m = pool_.Peek(r.model);
  if (!m || !m->model) {
    size_t bytes = 0;
    for (const std::string& t : r.inputs) bytes += t.size();
    f.tokens = GuessTokens(bytes);
    f.seconds = ColdSeconds((*entry)->file_bytes, f.tokens);
    return f;
  }
  f.loaded = true;
  const engine::Tokenizer tok(*m->model);
  for (const std::string& t : r.inputs) {
    auto ids = tok.Encode(t, true, false);
    f.tokens += ids ? static_cast<int>(ids->size()) : GuessTokens(t.size());
  }
  const int max_waiting = m->scheduler ? m->scheduler->options().max_queue : 0;
  const auto e = m->embed_load(max_waiting);
  f.queue_full = e.queue_full;
  f.tokens_ahead = e.tokens_ahead;
  double per_token = e.s_per_token;
  bool shared = false;
  if (m->scheduler) {
    const LoadForecast gen = m->scheduler->Forecast({}, 0);
    if (per_token <= 0) per_token = 1.0 / gen.prefill_tps;  // a forward pass costs about a prefill
    shared = gen.active + gen.waiting > 0;
  }
  if (per_token <= 0) per_token = 0.005;
  f.seconds = (f.tokens_ahead + f.tokens) * per_token * (shared ? 2 : 1);
  return f;
}

std::optional<int> LocalBackend::CountTokens(const std::string& model, const std::string& text) {
  std::shared_ptr<LoadedModel> m = pool_.Peek(model);
  if (!m || !m->model) return std::nullopt;
  auto tokens = engine::Tokenizer(*m->model).Encode(text, false, false);
  if (!tokens) return std::nullopt;
  return static_cast<int>(tokens->size());
}

Result<int> LocalBackend::CountPromptTokens(const GenerationRequest& r) {
  auto lease = pool_.Acquire(r.model, r.keep_alive_s);
  if (!lease) return lease.error();
  const LoadedModel& m = ***lease;
  if (r.chat) {
    if (r.messages.empty()) return MakeError(ErrorCode::kInvalidArgument, "'messages' must not be empty");
    auto p = RenderChat(*m.model, m.chat.get(), r);  // as Start renders it
    if (!p) return p.error();
    return static_cast<int>(p->tokens.size());
  }
  int n = 0;
  engine::Tokenizer tok(*m.model);
  for (const auto& text : r.prompts) {
    auto p = tok.Encode(text, /*add_special=*/!r.raw, /*parse_special=*/true);  // as Start reads a prompt
    if (!p) return p.error();
    n += static_cast<int>(p->size());
  }
  return n;
}

Result<std::unique_ptr<Completion>> LocalBackend::Start(const GenerationRequest& r) { return Start(r, nullptr); }

Result<std::unique_ptr<Completion>> LocalBackend::Start(const GenerationRequest& r,
                                                        std::shared_ptr<const PreparedPrompt> prepared) {
  // The grammar first: a schema that cannot be enforced is the client's error
  // whether or not the model exists, and costs no model load.
  auto sampling = SamplingFor(r.sampling, r.format);
  if (!sampling) return sampling.error();
  auto lease = pool_.Acquire(r.model, r.keep_alive_s);
  if (!lease) return lease.error();
  const LoadedModel* leased = &***lease;
  const engine::Model& model = *(**lease)->model;
  Scheduler& sched = *(**lease)->scheduler;
  const engine::ChatTemplate* chat = (**lease)->chat.get();
  auto run = std::make_unique<LocalCompletion>(std::move(*lease), r.stop);
  auto busy = [&] {
    metrics_.Add(metric::kRejected, run->model());
    Error e = MakeError(ErrorCode::kBusy,
                        "the server is busy: too many requests are waiting for this model; retry shortly");
    e.retry_after_s = 1;
    return e;
  };
  // Held before the template and the tokens: a burst past the queue is
  // refused before each request pays for them.
  QueuePlace place = sched.HoldPlace();
  if (!place) return busy();
  std::vector<std::vector<engine::Token>> prompts;
  std::optional<engine::ChatPlan> plan;
  std::vector<std::string> stops = r.stop;
  if (r.chat) {
    if (r.messages.empty()) return MakeError(ErrorCode::kInvalidArgument, "'messages' must not be empty");
    const bool reuse = prepared && prepared->model.lock().get() == leased;
    auto p = reuse ? Result<ChatPrompt>(prepared->chat) : RenderChat(model, chat, r);
    if (!p) return p.error();
    prompts.push_back(std::move(p->tokens));
    plan = std::move(p->plan);
    if (plan && plan->parse_output) {
      if (!sampling->grammar.empty() && !plan->grammar.empty()) {
        return MakeError(ErrorCode::kInvalidArgument, "'response_format' cannot be combined with tool calls");
      }
      if (!plan->grammar.empty()) {
        sampling->grammar = plan->grammar;
        sampling->grammar_lazy = plan->grammar_lazy;
        sampling->grammar_trigger_patterns = plan->trigger_patterns;
        sampling->grammar_trigger_tokens = plan->trigger_tokens;
        sampling->grammar_prefill = plan->grammar_prefill;
      }
    }
    if (plan) stops.insert(stops.end(), plan->stops.begin(), plan->stops.end());
  } else {
    engine::Tokenizer tok(model);
    for (const auto& text : r.prompts) {
      // A completion prompt is the caller's own template, special tokens
      // included ("<|im_start|>"), as llama-server, vLLM and Ollama's raw mode read it.
      auto p = tok.Encode(text, /*add_special=*/!r.raw, /*parse_special=*/true);
      if (!p) return p.error();
      if (p->empty()) return MakeError(ErrorCode::kInvalidArgument, "the prompt is empty");
      prompts.push_back(std::move(*p));
    }
  }
  const auto deadline = DeadlineAfter(timeout_s_);
  const std::string scope = CacheScope(r.tenant, r.cache_salt);
  for (auto& p : prompts) {
    std::vector<engine::Token> preserved = plan ? plan->preserved_tokens : std::vector<engine::Token>{};
    auto job =
        std::make_shared<Job>(std::move(p), r.max_tokens, *sampling, stops, deadline, std::move(preserved), scope);
    auto submitted = sched.Submit(job, &place);  // the first prompt takes the place
    if (!submitted) return submitted.error();  // ~LocalCompletion cancels the jobs already queued
    if (*submitted == SubmitResult::kQueueFull) return busy();
    if (*submitted == SubmitResult::kStopping) {
      Error e = MakeError(ErrorCode::kUnavailable, "the model is being unloaded; retry shortly");
      e.retry_after_s = 1;
      return e;
    }
    std::unique_ptr<engine::ChatOutputParser> parser;
    if (plan && plan->parse_output) parser = std::make_unique<engine::ChatOutputParser>(*plan);
    run->Add(std::move(job), std::move(parser));
  }
  return std::unique_ptr<Completion>(std::move(run));
}

Result<Embeddings> LocalBackend::Embed(const EmbeddingRequest& r, const std::function<bool()>& cancelled) {
  auto lease = pool_.Acquire(r.model, r.keep_alive_s);
  if (!lease) return lease.error();
  // Embeddings run on the model's own embedding session, beside the
  // scheduler (whose session computes no embeddings), one request at a time.
  const auto deadline = DeadlineAfter(timeout_s_);
  const int max_waiting = (**lease)->scheduler ? (**lease)->scheduler->options().max_queue : 0;
  auto emb = (**lease)->Embed(r.inputs, threads_, max_waiting,
                              [&] { return cancelled() || Clock::now() > deadline; });
  if (!emb && emb.error().code == ErrorCode::kBusy) metrics_.Add(metric::kRejected, (**lease)->name);
  if (!emb) {
    if (emb.error().code == ErrorCode::kAborted && Clock::now() > deadline) {
      return MakeError(ErrorCode::kTimeout, "the request ran past its timeout");
    }
    return emb.error();
  }
  Embeddings out;
  out.model = (**lease)->name;
  out.vectors = std::move(emb->vectors);
  out.prompt_tokens = emb->n_tokens;
  out.load_seconds = (*lease)->just_loaded ? (**lease)->load_seconds : 0;
  return out;
}

std::vector<ModelCard> LocalBackend::ListModels() {
  std::vector<ModelCard> cards;
  for (const auto& e : pool_.registry().entries()) {
    ModelCard card;
    card.size_bytes = e.file_bytes;
    if (auto info = engine::InspectModel(e.path)) {
      card.details = ModelCard::Details{info->architecture, info->n_params, info->file_type};
    }
    card.name = e.name;
    cards.push_back(card);
    for (const auto& a : e.aliases) {
      card.name = a;
      cards.push_back(card);
    }
  }
  return cards;
}

Result<backend::Loaded> LocalBackend::Load(const std::string& model, std::optional<double> keep_alive_s) {
  auto lease = pool_.Acquire(model, keep_alive_s);
  if (!lease) return lease.error();
  backend::Loaded out{.model = (**lease)->name, .load_seconds = (*lease)->just_loaded ? (**lease)->load_seconds : 0};
  lease->reset();                                                         // the keep_alive starts now
  if (keep_alive_s && *keep_alive_s == 0) (void)pool_.Unload(out.model);  // busy: it unloads once idle
  return out;
}

}  // namespace hone::serve
