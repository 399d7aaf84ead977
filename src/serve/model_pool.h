// Which registry models are resident, and the rules that load and evict them:
// a model loads on its first request after an admission check (weights + KV +
// compute from the GGUF header against free memory, cgroup included); idle
// models are evicted least recently used first when another needs the room,
// and unloaded when their keep_alive runs out; pinned models stay.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/chat.h"
#include "engine/embedder.h"
#include "engine/model.h"
#include "serve/metrics.h"
#include "serve/registry.h"
#include "serve/scheduler.h"

namespace hone::serve {

struct PoolOptions {
  SchedulerOptions scheduler;
  engine::LoadMode load_mode = engine::LoadMode::kMmap;
  uint64_t memory_limit_bytes = 0;    // 0 = what the machine (and cgroup) has free
  double default_keep_alive_s = 300;  // < 0: forever
  std::vector<std::string> pinned;    // model names never evicted nor expired
  // Apply `hone tune` profiles for this machine and model when there is one;
  // its concurrency sets the slots unless they were given explicitly.
  bool use_profiles = true;
  bool slots_explicit = false;
  // A model whose load failed (a corrupt or unreadable file) is not tried
  // again for this long, unless its file changes: every request in between
  // gets the same error at once, instead of another load (and the evictions
  // before it).
  double failed_load_retry_s = 30;
  // Requests waiting for one model's load beyond this get kBusy (429).
  int max_load_waiters = 64;
  // Speculation: scheduler.spec "auto" takes the tuned profile's choice
  // (else none); draft: a draft model file (or a registry name) for every
  // model; per_model: spec and draft for one model, over both.
  std::string draft;
  struct ModelSpec {
    std::string spec;   // empty: scheduler.spec
    std::string draft;  // empty: `draft`; "none": no draft model
  };
  std::map<std::string, ModelSpec> per_model;
};

// A resident model. Requests hold it through a Lease so it is not evicted under them.
class LoadedModel {
 public:
  std::string name;
  std::shared_ptr<engine::Model> model;
  std::unique_ptr<Scheduler> scheduler;
  // The model's chat template, parsed once at load; null when it has none
  // (a plain transcript then, serve/chat_prompt.h).
  std::unique_ptr<engine::ChatTemplate> chat;
  uint64_t estimate_bytes = 0;
  double load_seconds = 0;
  bool pinned = false;
  Clock::time_point loaded_at;
  std::string profile;  // the tuned profile applied, empty when none

  // Embeddings run on their own small session, created on first use, one
  // request at a time; at most `max_waiting` more wait their turn (beyond:
  // kBusy). `should_stop` (a disconnect, the deadline) is checked while
  // waiting, between texts and inside each decode; when it turns true: kAborted.
  Result<engine::EmbedResult> Embed(const std::vector<std::string>& texts, int threads, int max_waiting,
                                    const std::function<bool()>& should_stop);

  // Embedding work still to do on this model, which shares the cores with
  // the scheduler: what LocalBackend's forecasts add for it.
  struct EmbedLoad {
    long tokens_ahead = 0;    // of the texts waiting or running, not done yet
    double s_per_token = 0;   // measured, as if alone on the cores; 0 = not yet
    bool queue_full = false;  // an Embed now would get kBusy
  };
  EmbedLoad embed_load(int max_waiting) const;

 private:
  friend class ModelPool;
  // Held for a whole Embed call: one embedding batch at a time per model, as
  // the context holds one batch; a waiter gives up after its deadline.
  std::timed_mutex embed_mu_;
  std::atomic<int> embed_waiting_{0};               // Embed calls not yet holding embed_mu_
  std::atomic<bool> embed_running_{false};          // an Embed holds embed_mu_
  std::atomic<long> embed_tokens_{0};               // EmbedLoad::tokens_ahead
  std::atomic<double> embed_s_per_token_{0};        // EWMA; written under embed_mu_
  std::unique_ptr<engine::Session> embed_session_;  // guarded by embed_mu_
  int in_use_ = 0;                                  // guarded by the pool's mutex
  Clock::time_point last_used_;
  std::optional<Clock::time_point> expires_;  // nullopt: never
};

class ModelPool;

class Lease {
 public:
  Lease(ModelPool* pool, std::shared_ptr<LoadedModel> m, std::optional<double> keep_alive_s);
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  LoadedModel* operator->() const { return model_.get(); }
  LoadedModel& operator*() const { return *model_; }
  bool just_loaded = false;  // this request paid for the load
 private:
  ModelPool* pool_;
  std::shared_ptr<LoadedModel> model_;
  std::optional<double> keep_alive_s_;
};

struct ResidentInfo {
  std::string name;
  std::string path;
  uint64_t estimate_bytes = 0;
  bool pinned = false;
  int in_use = 0;
  std::optional<double> expires_in_s;  // nullopt: never
  int ctx_per_slot = 0;
  int slots = 0;
  std::string profile;  // the tuned profile applied at load, empty when none
};

class ModelPool {
 public:
  ModelPool(const Registry& registry, PoolOptions options, Metrics* metrics);
  ~ModelPool();  // unloads everything

  // Resolves, loads if needed (admission, then eviction of idle models), and
  // leases. keep_alive_s applies when the lease ends (nullopt: the default).
  // Errors: kNotFound / kInvalidArgument (name), kOutOfMemory (admission), load errors.
  Result<std::unique_ptr<Lease>> Acquire(const std::string& name, std::optional<double> keep_alive_s = {});
  // Unloads now if idle; Errors: kNotFound (not resident), kUnsupported (busy).
  Status Unload(const std::string& name);
  // The model if it is resident now, without loading it or taking a lease;
  // null when it is not (or the name is unknown).
  std::shared_ptr<LoadedModel> Peek(const std::string& name) const;
  Status SetPinned(const std::string& name, bool pinned);
  // Declares system prompts shared across tenants for a model: applied (and
  // warmed) at each load from now on, and now if it is resident. Loads
  // nothing. Errors: kNotFound (not in the registry), kInvalidArgument (an
  // empty prompt, or one its resident template refuses).
  Status ShareSystemPrompts(const std::string& name, const std::vector<std::string>& prompts);
  std::vector<ResidentInfo> Resident() const;
  uint64_t EstimateBytes(const RegistryEntry& e) const { return EstimateBytes(e, opt_.scheduler); }
  uint64_t EstimateBytes(const RegistryEntry& e, const SchedulerOptions& s) const;
  void PromptCacheFor(const RegistryEntry& e, SchedulerOptions* so) const;
  void ApplyTunedProfile(const RegistryEntry& e, SchedulerOptions* so, engine::LoadOptions* lo,
                         std::string* profile_path, std::string* profile_spec) const;
  // The speculation mode and draft model file for this model: per-model
  // settings, then the server's, "auto" resolved by the tuned profile.
  Status ChooseSpec(const RegistryEntry& e, const std::string& profile_spec, SchedulerOptions* so,
                    std::string* draft_path) const;
  const Registry& registry() const { return registry_; }

 private:
  friend class Lease;
  struct Entry {
    std::mutex load_mu;                   // one load at a time per model; other models keep serving
    std::shared_ptr<LoadedModel> loaded;  // GUARDED_BY(ModelPool::mu_): null when not resident
    std::atomic<int> load_waiters{0};     // Acquire calls at or past load_mu
    // GUARDED_BY(load_mu): the last failed load, its file's identity, and until when it stands.
    std::optional<Error> failed;
    std::string failed_file;  // size and mtime when it failed
    Clock::time_point failed_until;
    std::vector<std::string> shared_prompts;  // GUARDED_BY(load_mu): ShareSystemPrompts
  };
  void Release(LoadedModel* m, std::optional<double> keep_alive_s);
  // Makes room for `need` bytes (evicting idle models) and reserves them;
  // Load gives the reservation back on failure, Acquire when it is resident.
  // A refusal says which quantization of the model would fit (`so` sizes it).
  Status Admit(const RegistryEntry& e, uint64_t need, const SchedulerOptions& so);
  void Unreserve(uint64_t bytes);
  Result<std::shared_ptr<LoadedModel>> Load(const RegistryEntry& e);
  void Drop(std::vector<std::shared_ptr<LoadedModel>> victims);
  void Reaper();

  const Registry& registry_;
  PoolOptions opt_;
  Metrics* metrics_;
  // mu_ guards which models are resident (each Entry::loaded and its
  // LoadedModel's use count, last use and expiry), stopping_ and
  // reserved_bytes_. Never held across a load or an unload: those take
  // seconds, and other models keep serving meanwhile.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the reaper to stop
  bool stopping_ = false;       // GUARDED_BY(mu_)
  // One Entry per registry model, made in the constructor; the map itself
  // never changes after it, so it is read without a lock.
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  // GUARDED_BY(mu_): the estimates of loads admitted but not yet resident.
  // Loads of different models run at once; without this, two could each see
  // the same free memory and together pass the limit.
  uint64_t reserved_bytes_ = 0;
  std::thread reaper_;
};

}  // namespace hone::serve
