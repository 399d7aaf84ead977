#include "serve/model_pool.h"

#include <sys/stat.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/backend.h"
#include "engine/gguf_file.h"
#include "engine/memory_estimate.h"
#include "engine/tokenizer.h"
#include "hw/probe.h"
#include "serve/memory_advice.h"
#ifdef HONE_HAVE_TUNE
#include "tune/profile.h"
#endif
#include "util/file_hash.h"

namespace hone::serve {
namespace {

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::optional<Clock::time_point> ExpiryFor(double keep_alive_s) {
  if (keep_alive_s < 0) return std::nullopt;
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(keep_alive_s * 1e6));
}

}  // namespace

namespace {

// Counts a request's texts as embedding work ahead from the moment it is
// admitted until each text is done (LoadedModel::EmbedLoad).
class EmbedWork {
 public:
  EmbedWork(std::atomic<long>& total, const engine::Model& model, const std::vector<std::string>& texts)
      : total_(total) {
    const engine::Tokenizer tok(model);
    for (const std::string& t : texts) {
      auto ids = tok.Encode(t, true, false);
      counts_.push_back(ids ? static_cast<long>(ids->size()) : static_cast<long>(t.size() / 4 + 1));
      left_ += counts_.back();
    }
    total_ += left_;
  }
  ~EmbedWork() { total_ -= left_; }
  void Done(size_t i) {
    total_ -= counts_[i];
    left_ -= counts_[i];
  }

 private:
  std::atomic<long>& total_;
  std::vector<long> counts_;
  long left_ = 0;
};

}  // namespace

LoadedModel::EmbedLoad LoadedModel::embed_load(int max_waiting) const {
  EmbedLoad l;
  l.tokens_ahead = std::max(0L, embed_tokens_.load());
  l.s_per_token = embed_s_per_token_.load();
  l.queue_full = embed_running_.load() && embed_waiting_.load() >= max_waiting;
  return l;
}

Result<engine::EmbedResult> LoadedModel::Embed(const std::vector<std::string>& texts, int threads,
                                               int max_waiting, const std::function<bool()>& should_stop) {
  std::unique_lock<std::timed_mutex> lock(embed_mu_, std::try_to_lock);
  std::optional<EmbedWork> work;  // ahead of later requests from admission on
  if (!lock.owns_lock()) {
    struct Waiting {
      std::atomic<int>& n;
      ~Waiting() { --n; }
    } waiting{embed_waiting_};
    if (embed_waiting_.fetch_add(1) >= max_waiting) {
      Error e =
          MakeError(ErrorCode::kBusy, "the server is busy: " + std::to_string(max_waiting) +
                                          " embedding requests already wait for this model; retry shortly");
      e.retry_after_s = 1;
      return e;
    }
    work.emplace(embed_tokens_, *model, texts);
    // A waiter that left, or whose deadline passed, gives its place back.
    while (!lock.try_lock_for(std::chrono::milliseconds(50))) {
      if (should_stop()) return MakeError(ErrorCode::kAborted, "embedding was stopped while it waited");
    }
  }
  if (!work) work.emplace(embed_tokens_, *model, texts);
  embed_running_.store(true);
  struct Running {
    std::atomic<bool>& flag;
    ~Running() { flag.store(false); }
  } running{embed_running_};
  if (!embed_session_) {
    engine::SessionOptions so;
    so.embeddings = true;
    so.pooling = engine::Pooling::kMean;  // decoder models have no pooling of their own
    so.n_ctx = 512;
    so.n_batch = so.n_ubatch = 512;
    so.threads = threads;
    auto s = engine::Session::Create(model, so);
    if (!s) return s.error();
    embed_session_ = std::move(*s);
  }
  // One text per call (engine::Embed decodes them one by one anyway), so a
  // stop between texts costs nothing; the abort check covers a long decode.
  embed_session_->SetAbortCheck(should_stop);
  engine::EmbedResult out;
  for (size_t i = 0; i < texts.size(); ++i) {
    // Generation shares the cores while it runs: half of the time measured is theirs.
    const bool shared_before = scheduler && !scheduler->idle();
    const auto t0 = Clock::now();
    Result<engine::EmbedResult> one =
        should_stop() ? Result<engine::EmbedResult>(MakeError(ErrorCode::kAborted, "embedding was stopped"))
                      : engine::Embed(*embed_session_, {texts[i]});
    if (!one) {
      embed_session_->SetAbortCheck(nullptr);
      return one.error();
    }
    if (one->n_tokens > 0) {
      const bool shared = shared_before && scheduler && !scheduler->idle();
      const double s =
          std::chrono::duration<double>(Clock::now() - t0).count() / one->n_tokens / (shared ? 2 : 1);
      const double old = embed_s_per_token_.load();
      embed_s_per_token_.store(old == 0 ? s : 0.7 * old + 0.3 * s);
    }
    work->Done(i);
    out.vectors.push_back(std::move(one->vectors[0]));
    out.n_tokens += one->n_tokens;
  }
  embed_session_->SetAbortCheck(nullptr);
  return out;
}

Lease::Lease(ModelPool* pool, std::shared_ptr<LoadedModel> m, std::optional<double> keep_alive_s)
    : pool_(pool), model_(std::move(m)), keep_alive_s_(keep_alive_s) {}

Lease::~Lease() { pool_->Release(model_.get(), keep_alive_s_); }

ModelPool::ModelPool(const Registry& registry, PoolOptions options, Metrics* metrics)
    : registry_(registry), opt_(std::move(options)), metrics_(metrics) {
  for (const auto& e : registry_.entries()) entries_[e.name] = std::make_unique<Entry>();
  reaper_ = std::thread([this] { Reaper(); });
}

ModelPool::~ModelPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  reaper_.join();
  std::vector<std::shared_ptr<LoadedModel>> all;
  for (auto& [name, e] : entries_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (e->loaded) all.push_back(std::move(e->loaded));
  }
  Drop(std::move(all));
}

uint64_t ModelPool::EstimateBytes(const RegistryEntry& e, const SchedulerOptions& s) const {
  auto gguf = engine::ReadGguf(e.path);
  if (!gguf) return e.file_bytes;
  auto est = engine::EstimateMemory(*gguf, MemoryRequestFor(s));
  return est ? est->total() : e.file_bytes;
}

// Makes room for `need` bytes: evicts idle, unpinned models, least recently used first.
Status ModelPool::Admit(const RegistryEntry& e, uint64_t need, const SchedulerOptions& so) {
  std::vector<std::shared_ptr<LoadedModel>> victims;
  std::string refusal;  // set when it does not fit; the advice reads the file outside mu_
  uint64_t free_after = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto free_bytes = [&]() -> uint64_t {
      uint64_t resident = reserved_bytes_;
      for (auto& [n, en] : entries_) {
        if (en->loaded) resident += en->loaded->estimate_bytes;
      }
      if (opt_.memory_limit_bytes)
        return opt_.memory_limit_bytes > resident ? opt_.memory_limit_bytes - resident : 0;
      // MemAvailable counts mmap'd weights as reclaimable page cache, so count
      // resident models as used ourselves (a slight overcount for KV, on the safe side).
      hw::ProbeOptions po;
      po.measure_bandwidth = false;
      auto m = hw::Probe(po);
      uint64_t avail = m ? m->usable_memory_bytes() : 0;
      return avail > resident ? avail - resident : 0;
    };
    uint64_t have = free_bytes();
    while (have < need) {
      LoadedModel* lru = nullptr;
      std::string lru_name;
      for (auto& [n, en] : entries_) {
        auto& m = en->loaded;
        if (!m || m->pinned || m->in_use_ > 0) continue;
        if (!lru || m->last_used_ < lru->last_used_) lru = m.get(), lru_name = n;
      }
      if (!lru) break;
      victims.push_back(std::move(entries_[lru_name]->loaded));
      have = free_bytes();
    }
    if (have < need) {
      std::string loading;
      if (reserved_bytes_ > 0)
        loading = " (" + std::to_string(reserved_bytes_ >> 20) + " MiB held by loads in progress)";
      refusal = "model '" + e.name + "' needs about " + std::to_string(need >> 20) + " MiB but only " +
                std::to_string(have >> 20) + " MiB is free after evicting idle models" + loading;
      free_after = have;
    } else {
      reserved_bytes_ += need;
    }
  }
  Drop(std::move(victims));
  if (refusal.empty()) return Status::Ok();
  return MakeError(ErrorCode::kOutOfMemory, refusal + FitAdvice(e, so, free_after, need));
}

void ModelPool::Unreserve(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  reserved_bytes_ -= std::min(bytes, reserved_bytes_);
}

// The prompt cache's folder and key for this model: the key names all that
// changes a saved state's bytes, so a replaced model file, another llama.cpp
// or another KV type never restores a stale state (the cache deletes entries
// of another key when it opens).
void ModelPool::PromptCacheFor(const RegistryEntry& e, SchedulerOptions* so) const {
  auto hash = ModelFileHash(e.path);
  if (!hash) {
    std::fprintf(stderr, "hone serve: %s: no prompt cache on disk: %s\n", e.name.c_str(),
                 hash.error().message.c_str());
    so->cache.disk_bytes = 0;
  }
  const engine::SessionOptions& t = so->tuned ? *so->tuned : engine::SessionOptions{};
  const std::string kv_k = so->tuned ? t.kv_type_k : so->kv_type,
                    kv_v = so->tuned ? t.kv_type_v : so->kv_type;
  const engine::FlashAttn fa = so->tuned ? t.flash_attn : so->flash_attn;
  so->cache.key =
      "model=" + (hash ? *hash : std::string("unknown")) + ";llama.cpp=" + engine::LlamaVersion() +
      ";kv=" + kv_k + "/" + kv_v + ";fa=" + engine::FlashAttnName(fa) +
      (fa == engine::FlashAttn::kAuto ? "(off unless V is quantized)" : "") +  // auto meant on before
      ";slots=" + std::to_string(so->slots) +  // llama.cpp refuses a state saved with another stream count
      ";unified=" + (UsesSharedKv(*so) ? "1" : "0");
  if (!so->cache.dir.empty()) {
    std::string safe;
    for (char c : e.name) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
    Fnv1a exact;  // "a:b" and "a_b" must not share a folder (each would delete the other's files)
    exact.Add(e.name);
    so->cache.dir += "/" + safe + "-" + exact.Hex().substr(0, 8);
  }
}

Status ModelPool::ChooseSpec(const RegistryEntry& e, const std::string& profile_spec, SchedulerOptions* so,
                             std::string* draft_path) const {
  std::string draft = opt_.draft;
  if (auto it = opt_.per_model.find(e.name); it != opt_.per_model.end()) {
    if (!it->second.spec.empty()) so->spec = it->second.spec;
    if (!it->second.draft.empty()) draft = it->second.draft;
  }
  if (draft == "none") draft.clear();
  if (so->spec == "auto")
    so->spec = profile_spec.empty() ? (draft.empty() ? "none" : "draft-simple") : profile_spec;
  if (so->spec == "none") return Status::Ok();  // a draft model is loaded only to draft
  if (!draft.empty()) {
    // An operator's setting: a file, or a model of the registry by name.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(draft, ec)) {
      auto entry = registry_.Resolve(draft);
      if (!entry)
        return MakeError(ErrorCode::kNotFound,
                         "draft model '" + draft + "' is neither a file nor a model name");
      draft = (*entry)->path;
    }
  }
  *draft_path = draft;
  return Status::Ok();
}

// A tuned profile for this model file (from `hone tune`) sets the threads,
// batch sizes, slots and the speculation it measured best.
void ModelPool::ApplyTunedProfile(const RegistryEntry& e, SchedulerOptions* so, engine::LoadOptions* lo,
                                  std::string* profile_path, std::string* profile_spec) const {
#ifdef HONE_HAVE_TUNE
  if (!opt_.use_profiles) return;
  auto p = tune::FindProfile(e.path);
  if (!p || !p->has_value()) return;
  const tune::Profile& prof = **p;
  engine::SessionOptions tuned;
  tune::ApplyProfile(prof, &tuned, lo);
  so->tuned = tuned;
  int slots = prof.config.n_parallel > 1 ? prof.config.n_parallel : prof.concurrency;
  if (!opt_.slots_explicit && slots > 1) so->slots = slots;
  *profile_path = prof.path;
  if (prof.spec.measured && prof.spec.mode != "none") {
    *profile_spec = prof.spec.mode;
    if (prof.spec.ngram > 0) so->spec_ngram = prof.spec.ngram;
    so->spec_max = prof.spec.max_draft;
  }
#else
  (void)e, (void)so, (void)lo, (void)profile_path, (void)profile_spec;
#endif
}

Result<std::shared_ptr<LoadedModel>> ModelPool::Load(const RegistryEntry& e) {
  SchedulerOptions so = opt_.scheduler;
  engine::LoadOptions lo;
  lo.mode = opt_.load_mode;
  std::string profile_path, profile_spec;
  ApplyTunedProfile(e, &so, &lo, &profile_path, &profile_spec);
  std::string draft_path;
  if (Status s = ChooseSpec(e, profile_spec, &so, &draft_path); !s) {
    metrics_->Add(metric::kLoadFailures, e.name);
    return s.error();
  }
  // After the speculation is chosen: it decides the KV layout, part of the key.
  if (so.cache.ram_bytes > 0 || so.cache.disk_bytes > 0) PromptCacheFor(e, &so);
  uint64_t need = EstimateBytes(e, so);
  if (!draft_path.empty()) {  // the draft model and its KV count too
    RegistryEntry draft{e.name + " (draft)", draft_path, 0, {}};
    need += EstimateBytes(draft, so);
  }
  if (Status s = Admit(e, need, so); !s) {
    metrics_->Add(metric::kLoadFailures, e.name);
    return s.error();
  }
  auto t0 = Clock::now();
  auto model = engine::Model::Load(e.path, lo);
  if (!model) {
    Unreserve(need);
    metrics_->Add(metric::kLoadFailures, e.name);
    return model.error();
  }
  if (!draft_path.empty()) {
    auto draft = engine::Model::Load(draft_path, lo);
    if (!draft) {
      Unreserve(need);
      metrics_->Add(metric::kLoadFailures, e.name);
      return MakeError(draft.error().code, "the draft model " + draft_path + ": " + draft.error().message);
    }
    so.draft_model = std::move(*draft);
  }
  auto sched = Scheduler::Create(*model, so, metrics_, e.name);
  if (!sched) {
    Unreserve(need);
    metrics_->Add(metric::kLoadFailures, e.name);
    return sched.error();
  }
  auto m = std::make_shared<LoadedModel>();
  m->name = e.name;
  m->model = std::move(*model);
  m->scheduler = std::move(*sched);
  if (!m->model->info().chat_template.empty()) {
    auto chat = engine::ChatTemplate::ForModel(*m->model);
    if (chat) {
      m->chat = std::move(*chat);
    } else {
      std::fprintf(stderr, "hone serve: %s: %s; chat falls back to a plain transcript\n", e.name.c_str(),
                   chat.error().message.c_str());
    }
  }
  // Load runs under the entry's load_mu (Acquire), which guards the list.
  if (Status st = WarmSharedPrompts(*m, entries_.at(e.name)->shared_prompts); !st)
    std::fprintf(stderr, "hone serve: %s: %s\n", e.name.c_str(), st.error().message.c_str());
  m->estimate_bytes = need;
  m->load_seconds = SecondsSince(t0);
  m->pinned = std::find(opt_.pinned.begin(), opt_.pinned.end(), e.name) != opt_.pinned.end();
  m->loaded_at = m->last_used_ = Clock::now();
  m->expires_ = ExpiryFor(opt_.default_keep_alive_s);
  m->profile = profile_path;
  metrics_->Add(metric::kLoads, e.name);
  metrics_->Observe(metric::kLoadSeconds, e.name, m->load_seconds);
  return m;
}

namespace {
// A file's identity for the failed-load memory: a replaced file is tried again.
std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}
}  // namespace

Status ModelPool::ShareSystemPrompts(const std::string& name, const std::vector<std::string>& prompts) {
  auto entry = registry_.Resolve(name);
  if (!entry) return entry.error();
  for (const auto& p : prompts)
    if (p.empty()) return MakeError(ErrorCode::kInvalidArgument, "a shared system prompt is empty");
  Entry& slot = *entries_.at((*entry)->name);
  std::lock_guard<std::mutex> load_lock(slot.load_mu);  // no load in between: each sees all or none
  slot.shared_prompts.insert(slot.shared_prompts.end(), prompts.begin(), prompts.end());
  std::shared_ptr<LoadedModel> m = Peek((*entry)->name);
  return m ? WarmSharedPrompts(*m, prompts) : Status::Ok();
}

Result<std::unique_ptr<Lease>> ModelPool::Acquire(const std::string& name,
                                                  std::optional<double> keep_alive_s) {
  auto entry = registry_.Resolve(name);
  if (!entry) return entry.error();
  Entry& slot = *entries_.at((*entry)->name);
  struct Waiting {
    std::atomic<int>& n;
    ~Waiting() { --n; }
  } waiting{slot.load_waiters};
  if (slot.load_waiters.fetch_add(1) >= opt_.max_load_waiters) {
    Error e =
        MakeError(ErrorCode::kBusy, std::to_string(opt_.max_load_waiters) + " requests already wait for '" +
                                        (*entry)->name + "' to load; retry shortly");
    e.retry_after_s = 2;
    return e;
  }
  std::lock_guard<std::mutex> load_lock(slot.load_mu);
  bool loaded_now = false;
  std::shared_ptr<LoadedModel> m;
  {
    // Lease under the lock so the reaper cannot unload it between lookup and use.
    std::lock_guard<std::mutex> lock(mu_);
    m = slot.loaded;
    if (m) ++m->in_use_, m->last_used_ = Clock::now();
  }
  if (!m) {
    const std::string stamp = FileStamp((*entry)->path);
    if (slot.failed && Clock::now() < slot.failed_until && stamp == slot.failed_file) {
      Error e = *slot.failed;
      const double left = std::chrono::duration<double>(slot.failed_until - Clock::now()).count();
      e.message += " (the last load failed; not retried for " + std::to_string(static_cast<int>(left + 1)) +
                   " s unless the file changes)";
      e.retry_after_s = static_cast<int>(left + 1);
      return e;
    }
    auto r = Load(**entry);
    if (!r) {
      // Admission depends on what else is resident, so it is asked again each time.
      if (r.error().code != ErrorCode::kOutOfMemory && opt_.failed_load_retry_s > 0) {
        slot.failed = r.error();
        slot.failed_file = stamp;
        slot.failed_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(opt_.failed_load_retry_s));
      }
      return r.error();
    }
    slot.failed.reset();
    m = *r;
    loaded_now = true;
    std::lock_guard<std::mutex> lock(mu_);
    slot.loaded = m;  // counted as resident from here: its reservation ends
    reserved_bytes_ -= std::min(m->estimate_bytes, reserved_bytes_);
    ++m->in_use_;
  }
  auto lease = std::make_unique<Lease>(this, m, keep_alive_s);
  lease->just_loaded = loaded_now;
  return lease;
}

std::shared_ptr<LoadedModel> ModelPool::Peek(const std::string& name) const {
  auto entry = registry_.Resolve(name);
  if (!entry) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find((*entry)->name);
  return it == entries_.end() ? nullptr : it->second->loaded;
}

void ModelPool::Release(LoadedModel* m, std::optional<double> keep_alive_s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --m->in_use_;
    m->last_used_ = Clock::now();
    m->expires_ = ExpiryFor(keep_alive_s.value_or(opt_.default_keep_alive_s));
  }
  cv_.notify_all();  // keep_alive 0: the reaper unloads it now
}

Status ModelPool::Unload(const std::string& name) {
  auto entry = registry_.Resolve(name);
  if (!entry) return entry.error();
  std::shared_ptr<LoadedModel> victim;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& m = entries_.at((*entry)->name)->loaded;
    if (!m) return MakeError(ErrorCode::kNotFound, "model '" + name + "' is not loaded");
    if (m->in_use_ > 0) {
      // Busy: unload as soon as the last request ends.
      m->expires_ = Clock::now();
      m->pinned = false;
      return MakeError(ErrorCode::kUnsupported,
                       "model '" + name + "' is serving requests; it unloads when they end");
    }
    victim = std::move(m);
  }
  Drop({victim});
  return Status::Ok();
}

Status ModelPool::SetPinned(const std::string& name, bool pinned) {
  auto entry = registry_.Resolve(name);
  if (!entry) return entry.error();
  std::lock_guard<std::mutex> lock(mu_);
  auto& m = entries_.at((*entry)->name)->loaded;
  if (!m) return MakeError(ErrorCode::kNotFound, "model '" + name + "' is not loaded");
  m->pinned = pinned;
  return Status::Ok();
}

std::vector<ResidentInfo> ModelPool::Resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ResidentInfo> out;
  for (const auto& [name, e] : entries_) {
    if (!e->loaded) continue;
    const LoadedModel& m = *e->loaded;
    ResidentInfo r{name,
                   m.model->info().path,
                   m.estimate_bytes,
                   m.pinned,
                   m.in_use_,
                   std::nullopt,
                   m.scheduler->ctx_per_slot(),
                   m.scheduler->options().slots,
                   m.profile};
    if (m.expires_ && !m.pinned)
      r.expires_in_s = std::chrono::duration<double>(*m.expires_ - Clock::now()).count();
    out.push_back(r);
  }
  return out;
}

// Destroys models outside the pool lock (joining a scheduler can take a step).
void ModelPool::Drop(std::vector<std::shared_ptr<LoadedModel>> victims) {
  for (auto& v : victims) {
    if (!v) continue;
    auto t0 = Clock::now();
    std::string name = v->name;
    v.reset();
    metrics_->Add(metric::kUnloads, name);
    metrics_->Observe(metric::kUnloadSeconds, name, SecondsSince(t0));
    metrics_->Set(metric::kRunning, name, 0);
    metrics_->Set(metric::kWaiting, name, 0);
    metrics_->Set(metric::kKvUsage, name, 0);
    metrics_->SetInfo(metric::kCacheConfig, name, {});
    metrics_->Set(metric::kSlotWait, name, 0);
  }
  // glibc keeps what a model's buffers free in the arena of the thread that
  // allocated them, and loads run on whichever HTTP worker asked: without a
  // trim, RSS grew by about a KV cache per load/unload cycle until every
  // arena held one (bench/soak.py saw +590 MB/hour). Unloads are rare; a trim
  // costs milliseconds.
#if defined(__GLIBC__)
  if (!victims.empty()) malloc_trim(0);
#endif
}

// Unloads models whose keep_alive ran out, waking early when a lease ends.
void ModelPool::Reaper() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    std::vector<std::shared_ptr<LoadedModel>> victims;
    const auto now = Clock::now();
    for (auto& [name, e] : entries_) {
      auto& m = e->loaded;
      if (m && !m->pinned && m->in_use_ == 0 && m->expires_ && *m->expires_ <= now)
        victims.push_back(std::move(m));
    }
    if (victims.empty()) continue;
    lock.unlock();
    Drop(std::move(victims));
    lock.lock();
  }
}

}  // namespace hone::serve
