// The backend contract: the one interface every backend implements (the
// local engine, serve::LocalBackend; an upstream, route::RemoteBackend; and
// the router, a Backend over the others) and the request and result types
// every layer shares. The HTTP front ends (src/api) only ever talk to a
// Backend.
//
// Everything here is free of transport: no HTTP status, no JSON envelope, no
// socket, and no llama.cpp detail (a ResponseFormat, not a GBNF grammar).
// Errors are hone::Error values; the codes a backend refuses with are
// kInvalidArgument (a bad request), kNotFound (unknown model), kBusy (queue
// full), kUnavailable (loading, draining), kRateLimited, kUpstream, kTimeout,
// kOutOfMemory (cannot host the model now) and kInternal, with
// Error::retry_after_s where waiting helps.
//
// It sits in a folder of its own, below api, route and serve alike, so that
// adding a request field or a result kind edits none of them but the ones
// that use it. Fields only the router reads are grouped in RoutingContext.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::backend {

using Clock = std::chrono::steady_clock;

// A function call the model made (or made earlier, in a conversation's history).
struct ToolCall {
  std::string id;  // "call_…": a tool message answers it by this id
  std::string name;
  std::string arguments;  // JSON text, as OpenAI carries it
};

struct Message {
  Message() = default;
  Message(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made
  std::string tool_call_id;          // tool: the call this result answers
  std::string name;                  // tool: the function's name, where the client says
};

// A function the model may call.
struct Tool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON schema text, keys in the client's order; empty: any object
};

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired };
  Mode mode = Mode::kAuto;
  std::string function;  // with kRequired: this function and no other
};

// What the client asked for; an unset field takes the backend's default. A
// codec fills in its API's own defaults (OpenAI samples at temperature 1 over
// the whole distribution) before the request gets here.
struct Sampling {
  std::optional<float> temperature;  // <= 0: greedy
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<uint32_t> seed;
  std::optional<float> repeat_penalty;
  std::optional<int> repeat_last_n;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
};

// Structured output. A backend enforces it its own way (the local one with a
// grammar; an upstream passes it on).
struct ResponseFormat {
  enum class Type { kNone, kJsonObject, kJsonSchema };
  Type type = Type::kNone;
  nlohmann::json schema;  // with kJsonSchema
};

// What only the router reads: which canary arm, which ledger row, whether the
// response cache may answer. The codecs fill it from the client's request;
// the local backend never looks at it.
struct RoutingContext {
  // The end user the client names (OpenAI `user`, Anthropic metadata.user_id),
  // at most 256 bytes: a canary keeps one user's conversation on one arm.
  std::string user;
  // The spend ledger's id for this request at this target (set by the
  // router); an upstream receives it as X-Hone-Request-Id.
  std::string ledger_id;
  // The client asked to skip the response cache (Cache-Control: no-cache or
  // no-store, or X-Hone-Cache: bypass): neither read nor written.
  bool no_cache = false;
};

struct GenerationRequest {
  std::string model;
  // A chat renders `messages` with the model's chat template; otherwise each
  // of `prompts` is its own completion (a prompt array, one choice each).
  bool chat = false;
  std::vector<Message> messages;
  std::vector<std::string> prompts;
  bool raw = false;     // completion text goes in as is (no BOS token)
  int max_tokens = -1;  // < 0: until the model stops or the context is full
  Sampling sampling;
  std::vector<std::string> stop;
  ResponseFormat format;
  std::vector<Tool> tools;  // a chat only
  ToolChoice tool_choice;
  std::optional<bool> parallel_tool_calls;  // unset: the backend's default (local: false)
  std::optional<double> keep_alive_s;       // how long the model stays resident after
  // The last message is the start of the assistant's answer, to be continued
  // rather than answered (vLLM's continue_final_message; the router uses it to
  // resume a stream that broke on another target).
  bool continue_final = false;
  // True once the caller no longer wants the answer (its client left). A
  // backend that waits before it can hand out a Completion (an upstream's
  // first byte, a retry's backoff) checks it and gives up with kAborted.
  std::function<bool()> cancelled;
  // Who asks: the fingerprint of the client's API key ("key-1a2b3c4d"), or
  // empty on a server without keys. Budgets and the cache are kept per tenant.
  std::string tenant;
  RoutingContext routing;  // the router's alone
  // Requests with the same salt share cached prompt prefixes (vLLM's
  // cache_salt); without one, prefixes are shared within the tenant only.
  std::string cache_salt;
};

struct Usage {
  int prompt_tokens = 0;
  int cached_tokens = 0;  // of prompt_tokens, reused from a prefix cache
  int completion_tokens = 0;
  int draft_tokens = 0;     // speculative decoding (--spec): tokens drafted...
  int accepted_tokens = 0;  // ...and kept
  bool estimated = false;  // the backend reported no usage: these are hone's counts
  Usage& operator+=(const Usage& o);
};

// Names follow OpenAI's finish_reason where one exists.
enum class FinishReason {
  kNone,
  kStop,
  kLength,
  kToolCalls,
  kCancelled,
  kTimeout,
  kError
};  // kNone: not over
// "none", "stop", "length", "tool_calls", "cancelled", "timeout", "error"
const char* FinishReasonName(FinishReason f);

// How one choice ended.
struct ChoiceResult {
  FinishReason finish = FinishReason::kStop;
  // Set unless the choice ended normally (stop or length): kTimeout; kInternal
  // when it failed or the server stopped it (the model unloaded under it);
  // kUpstream from a remote backend. A choice the caller cancelled ends with
  // finish kCancelled and an error the caller may ignore.
  std::optional<Error> error;
  Usage usage;
  double queue_s = 0;            // waiting for a slot
  double prompt_s = 0;           // prefill: slot start to first token
  double generation_s = 0;       // first token to finish
  std::optional<double> ttft_s;  // queued to first token, when there was one
  std::string stop_sequence;     // the client's stop string that ended it (Anthropic reports it)
  // Set by the router: route, target, attempts and why it overflowed, for the log line.
  std::string route;
  bool ok() const { return !error; }
};

// A piece of a tool call as it streams: the first piece of call `index`
// carries its id and name, later ones more of its arguments (OpenAI's
// delta.tool_calls).
struct ToolCallDelta {
  size_t index = 0;  // the call's place among the choice's calls
  std::string id;
  std::string name;
  std::string arguments;
};

// What Completion::Next hands out, in order: for choice 0 its text and tool
// call pieces then kChoiceEnd, then the same for choice 1, ..., then kDone.
struct CompletionEvent {
  enum class Kind {
    kText,       // `text` is the next piece of `choice` (valid UTF-8, never empty)
    kToolCall,   // `tool` is the next piece of one of `choice`'s tool calls
    kChoiceEnd,  // `choice` is over: see `result`
    kIdle,       // the deadline passed with nothing new (queued, prefilling)
    kDone,       // every choice has ended
  };
  Kind kind = Kind::kIdle;
  size_t choice = 0;
  std::string text;
  ToolCallDelta tool;
  ChoiceResult result;
};

// A started generation: an RAII reader over its choices. Destroying it
// cancels whatever still runs. One thread reads it at a time; Cancel may be
// called from any thread.
class Completion {
 public:
  virtual ~Completion() = default;
  virtual CompletionEvent Next(Clock::time_point deadline) = 0;
  // Stops every choice within a step; Next still hands out what was produced
  // and each choice's end (finish kCancelled), so usage can be logged.
  virtual void Cancel() = 0;
  virtual size_t choices() const = 0;
  virtual const std::string& model() const = 0;  // the canonical name that serves it
  virtual double load_seconds() const = 0;       // > 0 when this request paid for a load
  // "hit" or "miss" when a response cache was asked (X-Hone-Cache); null otherwise.
  virtual const char* cache_status() const { return nullptr; }
};

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> inputs;
  std::optional<double> keep_alive_s;
};

struct Embeddings {
  std::string model;  // canonical name
  std::vector<std::vector<float>> vectors;
  int prompt_tokens = 0;
  double load_seconds = 0;
};

// What a model listing says about each name a client may send.
struct ModelCard {
  std::string name;  // an alias is a card of its own
  uint64_t size_bytes = 0;
  // From the model file, where it could be read.
  struct Details {
    std::string family;  // architecture: "qwen2", "llama"
    uint64_t parameters = 0;
    std::string quantization;  // "Q4_K - Medium"
  };
  std::optional<Details> details;
};

// A model made resident by Backend::Load.
struct Loaded {
  std::string model;          // canonical name
  double load_seconds = 0;    // > 0 when this call paid for the load
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Checks and queues the request. Thread-safe.
  virtual Result<std::unique_ptr<Completion>> Start(const GenerationRequest& request) = 0;
  // Stops early when `cancelled` turns true (checked between and during
  // inputs); the backend's own deadline applies too. Thread-safe.
  virtual Result<Embeddings> Embed(const EmbeddingRequest& request,
                                   const std::function<bool()>& cancelled) = 0;
  virtual std::vector<ModelCard> ListModels() = 0;  // thread-safe
  // Makes a model resident without generating (Ollama's empty prompt), for
  // keep_alive_s afterwards; 0 unloads it now if idle. Returns its canonical
  // name, and the seconds the load took when this call made it. Every load
  // goes through here: a route name loads the route's local target.
  // Thread-safe.
  virtual Result<Loaded> Load(const std::string& model, std::optional<double> keep_alive_s) = 0;
  // The prompt tokens `request` comes to, rendered and tokenized exactly as
  // Start would (Anthropic's count_tokens); loads the model if need be, and
  // queues nothing. A backend that cannot tell (an upstream) says so with
  // kInvalidArgument. Thread-safe.
  virtual Result<int> CountPromptTokens(const GenerationRequest& request) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + request.model + "' cannot count tokens here");
  }
};

}  // namespace hone::backend
