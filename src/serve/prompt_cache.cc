#include "serve/prompt_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "serve/prompt_cache_file.h"
#include "serve/shared_prefixes.h"
#include "util/file_hash.h"

namespace hone::serve {
namespace fs = std::filesystem;

namespace {

using SteadyClock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;

int64_t WallMs(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// A floor for the bytes that may wait for the disk, for small --cache-ram.
constexpr uint64_t kMinQueuedBytes = 64ull << 20;

const std::string kMetricPrefix = "hone_prompt_cache_";
std::string TierMetric(CacheTier t, const char* what) {
  return kMetricPrefix + CacheTierName(t) + "_" + what;
}

}  // namespace

const char* CacheTierName(CacheTier t) {
  switch (t) {
    case CacheTier::kRam:
      return "ram";
    case CacheTier::kDisk:
      return "disk";
    default:
      return "none";
  }
}

std::string CacheScope(const std::string& tenant, const std::string& cache_salt) {
  if (cache_salt.empty()) return tenant;
  Fnv1a h;
  h.Add(cache_salt);
  return "salt-" + h.Hex();
}

PromptCache::PromptCache(PromptCacheOptions options, Metrics* metrics, std::string model_name)
    : opt_(std::move(options)),
      ram_limit_(opt_.ram_limit ? opt_.ram_limit : std::make_shared<CacheRamLimit>(opt_.ram_bytes)),
      metrics_(metrics),
      model_(std::move(model_name)) {
  ram_limit_->Join(this);
  if (opt_.disk_bytes > 0 && !opt_.dir.empty()) IndexDisk();
  {
    std::lock_guard<std::mutex> lock(mu_);
    UpdateGaugesLocked();
  }
  if (disk_on_) writer_ = std::thread([this] { WriterLoop(); });
}

PromptCache::~PromptCache() {
  ram_limit_->Leave(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();                // the writer empties its queue first
  ram_limit_->Charge(-static_cast<int64_t>(ram_used_));  // the other models may use it now
  if (metrics_) {
    for (CacheTier t : {CacheTier::kRam, CacheTier::kDisk}) metrics_->Set(TierMetric(t, "bytes"), model_, 0);
  }
}

std::string PromptCache::PathFor(uint64_t id) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.kv", static_cast<unsigned long long>(id));
  return (fs::path(opt_.dir) / name).string();
}

// Reads every entry's header: the disk tier comes back after a restart or a
// reload. Files of another key (the model file was replaced, llama.cpp or the
// KV type changed), damaged ones and .tmp leftovers of a killed write go.
void PromptCache::IndexDisk() {
  std::error_code ec;
  fs::create_directories(opt_.dir, ec);
  // Only this user: the entries are every tenant's conversations.
  if (!ec) fs::permissions(opt_.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec || access(opt_.dir.c_str(), W_OK) != 0) {
    std::fprintf(stderr,
                 "hone serve: %s: prompt cache folder %s is not writable (%s); the disk tier is off\n",
                 model_.c_str(), opt_.dir.c_str(), ec ? ec.message().c_str() : "permission denied");
    return;
  }
  disk_on_ = true;
  std::vector<std::pair<fs::file_time_type, Entry>> found;
  int stale = 0, damaged = 0;
  for (const auto& de : fs::directory_iterator(opt_.dir, ec)) {
    const std::string path = de.path().string();
    if (de.path().extension() == ".tmp") {
      fs::remove(de.path(), ec);
      continue;
    }
    if (de.path().extension() != ".kv") continue;
    // Our own names are 16 hex digits; anything else in the folder is not ours to index.
    const std::string stem = de.path().stem().string();
    if (stem.size() != 16 || stem.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    auto h = ReadCacheFileHeader(path);
    if (!h || h->key != opt_.key) {
      (h ? stale : damaged)++;
      fs::remove(de.path(), ec);
      continue;
    }
    Entry e;
    e.id = std::stoull(stem, nullptr, 16);
    e.scope = h->scope;
    e.tokens = std::move(h->tokens);
    e.bytes = h->state_bytes;
    e.file = path;
    e.created = WallClock::time_point(std::chrono::milliseconds(h->created_ms));
    e.used = SteadyClock::now();
    found.emplace_back(fs::last_write_time(de.path(), ec), std::move(e));
  }
  // Oldest first, so the least recently written is the first to go.
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> doomed;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [t, e] : found) {
    disk_used_ += e.bytes;
    entries_.push_back(std::move(e));
  }
  EvictDiskLocked(&doomed);
  if (stale || damaged || !found.empty()) {
    std::fprintf(stderr, "hone serve: %s: prompt cache on disk: %zu entries (%.1f MiB) in %s%s%s\n",
                 model_.c_str(), entries_.size(), disk_used_ / 1048576.0, opt_.dir.c_str(),
                 stale ? (", " + std::to_string(stale) + " of another model or build deleted").c_str() : "",
                 damaged ? (", " + std::to_string(damaged) + " damaged deleted").c_str() : "");
  }
  Delete(doomed);
}

CacheMatch PromptCache::Find(const std::string& scope, const std::vector<Token>& prompt) const {
  CacheMatch best;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.scope != scope || (!e.state && e.file.empty())) continue;
    const size_t n = CommonPrefix(e.tokens, prompt);
    // Equal holds go to the shorter entry: less to restore.
    if (n > best.tokens || (n == best.tokens && n > 0 && e.tokens.size() < best.entry_tokens)) {
      best = {e.state ? CacheTier::kRam : CacheTier::kDisk, e.id, n, e.tokens.size()};
    }
  }
  if (best.tokens < opt_.min_tokens) return CacheMatch{};
  return best;
}

bool PromptCache::Covers(const std::string& scope, const std::vector<Token>& tokens) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.scope == scope && e.tokens.size() >= tokens.size() &&
        CommonPrefix(e.tokens, tokens) == tokens.size())
      return true;
  }
  return false;
}

std::list<PromptCache::Entry>::iterator PromptCache::FindId(uint64_t id) {
  return std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
}

uint64_t PromptCache::NewIdLocked() {
  for (;;) {
    const uint64_t id = ids_();
    if (id != 0 && FindId(id) == entries_.end()) return id;
  }
}

std::shared_ptr<const std::vector<uint8_t>> PromptCache::Load(const CacheMatch& m, CacheTier* served) {
  std::string file;
  std::string scope;
  std::vector<Token> tokens;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = FindId(m.id);
    if (it == entries_.end()) return nullptr;
    it->used = SteadyClock::now();
    entries_.splice(entries_.end(), entries_, it);  // most recently used
    if (served) *served = CacheTier::kRam;
    if (it->state) return it->state;
    // Out of RAM, its write still queued: the queue holds the bytes.
    for (const Write& w : writes_) {
      if (w.id == m.id) return w.state;
    }
    if (it->file.empty()) return nullptr;  // being written right now: a miss this once
    file = it->file;
    scope = it->scope;
    tokens = it->tokens;
  }
  if (served) *served = CacheTier::kDisk;
  CacheFileHeader h;
  auto state = ReadCacheFileState(file, opt_.key, &h);
  // The file must be this entry: another cache on the same folder, or a
  // file put there by hand, must never be restored under these tokens.
  if (state && (h.scope != scope || h.tokens != tokens)) {
    state = MakeError(ErrorCode::kCorrupt, "prompt cache file " + file + " holds another entry");
  }
  if (state) return std::make_shared<const std::vector<uint8_t>>(std::move(*state));
  std::fprintf(stderr, "hone serve: %s: %s; treated as a miss and deleted\n", model_.c_str(),
               state.error().message.c_str());
  Drop(m.id);
  if (metrics_) metrics_->Add(TierMetric(CacheTier::kDisk, "damaged_total"), model_);
  return nullptr;
}

void PromptCache::Drop(uint64_t id) {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = FindId(id); it != entries_.end()) EraseLocked(it, &doomed);
    UpdateGaugesLocked();
  }
  Delete(doomed);
}

void PromptCache::Put(const std::string& scope, std::vector<Token> tokens, std::vector<uint8_t> state) {
  if (tokens.size() < opt_.min_tokens || state.empty()) return;
  if (ram_limit_->limit() == 0 && !disk_on_) return;
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_) {  // already held whole, by this entry or a longer one
      if (e.scope == scope && CommonPrefix(e.tokens, tokens) == tokens.size()) return;
    }
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->scope != scope) {
        ++it;
        continue;
      }
      if (CommonPrefix(it->tokens, tokens) ==
          it->tokens.size()) {  // the new one extends it: keep only the longer
        auto gone = it++;
        EraseLocked(gone, &doomed);
      } else {
        ++it;
      }
    }
    Entry e;
    e.id = NewIdLocked();
    e.scope = scope;
    e.bytes = state.size();
    e.state = std::make_shared<const std::vector<uint8_t>>(std::move(state));
    e.tokens = std::move(tokens);
    e.created = WallClock::now();
    e.used = SteadyClock::now();
    AddRamLocked(static_cast<int64_t>(e.bytes));
    // Bytes waiting for a slow disk are held beside the RAM tier: past a
    // bound the entry stays in RAM only, so RSS stays near --cache-ram.
    if (disk_on_ && queued_bytes_ + e.bytes <= std::max<uint64_t>(ram_limit_->limit() / 4, kMinQueuedBytes)) {
      e.writing = true;
      queued_bytes_ += e.bytes;
      writes_.push_back({e.id, e.scope, e.tokens, e.state, WallMs(e.created)});
    } else if (disk_on_ && metrics_) {
      metrics_->Add(TierMetric(CacheTier::kDisk, "writes_skipped_total"), model_);
    }
    entries_.push_back(std::move(e));
    UpdateGaugesLocked();
  }
  cv_.notify_all();
  ram_limit_->Enforce();  // outside mu_: it may evict from this cache or another model's
  Delete(doomed);
}

std::optional<SteadyClock::time_point> PromptCache::OldestRamUse() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.state) return e.used;  // entries_ runs from least to most recently used
  }
  return std::nullopt;
}

bool PromptCache::EvictOldestRam() {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.state != nullptr; });
  if (it == entries_.end()) return false;
  EvictRamLocked(it);
  UpdateGaugesLocked();
  return true;
}

// An entry on disk (or on its way there) only leaves RAM; one with nowhere
// to go is dropped.
void PromptCache::EvictRamLocked(std::list<Entry>::iterator it) {
  AddRamLocked(-static_cast<int64_t>(it->bytes));
  it->state.reset();  // a queued write still holds the bytes until they are on disk
  if (metrics_) metrics_->Add(TierMetric(CacheTier::kRam, "evictions_total"), model_);
  if (it->file.empty() && !it->writing) entries_.erase(it);
}

void PromptCache::AddRamLocked(int64_t bytes) {
  ram_used_ += static_cast<uint64_t>(bytes);
  ram_limit_->Charge(bytes);
}

void PromptCache::EvictDiskLocked(std::vector<std::string>* doomed) {
  for (auto it = entries_.begin(); disk_used_ > opt_.disk_bytes && it != entries_.end();) {
    if (it->file.empty()) {
      ++it;
      continue;
    }
    doomed->push_back(it->file);
    disk_used_ -= it->bytes;
    it->file.clear();
    if (metrics_) metrics_->Add(TierMetric(CacheTier::kDisk, "evictions_total"), model_);
    if (!it->state) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void PromptCache::EraseLocked(std::list<Entry>::iterator it, std::vector<std::string>* doomed) {
  if (it->state) AddRamLocked(-static_cast<int64_t>(it->bytes));
  if (!it->file.empty()) {
    disk_used_ -= it->bytes;
    doomed->push_back(it->file);
  }
  const uint64_t id = it->id;
  for (const Write& w : writes_) {
    if (w.id == id) queued_bytes_ -= w.state->size();
  }
  writes_.erase(std::remove_if(writes_.begin(), writes_.end(), [&](const Write& w) { return w.id == id; }),
                writes_.end());
  entries_.erase(it);  // a write in flight finds its entry gone and deletes its file
}

void PromptCache::WriterLoop() {
  for (;;) {
    Write w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
      if (writes_.empty()) return;  // stopping, and everything queued is written
      w = std::move(writes_.front());
      writes_.pop_front();
      queued_bytes_ -= w.state->size();
      ++writes_in_flight_;
    }
    const std::string path = PathFor(w.id);
    CacheFileHeader h{opt_.key, w.scope, w.tokens, w.state->size(), w.created_ms};
    Status st = WriteCacheFile(path, h, *w.state);
    // Counted before the write leaves the in-flight count: Flush's callers see it.
    if (!st) {
      // A full disk fails every write: one line a minute says so, with how many.
      ++write_errors_unlogged_;
      const auto now = SteadyClock::now();
      if (now - last_write_error_log_ > std::chrono::minutes(1)) {
        std::fprintf(
            stderr, "hone serve: %s: prompt cache entry not kept on disk (%d since the last such line): %s\n",
            model_.c_str(), write_errors_unlogged_, st.error().message.c_str());
        last_write_error_log_ = now;
        write_errors_unlogged_ = 0;
      }
      if (metrics_) metrics_->Add(TierMetric(CacheTier::kDisk, "write_errors_total"), model_);
    }
    std::vector<std::string> doomed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --writes_in_flight_;
      auto it = FindId(w.id);
      if (it != entries_.end()) it->writing = false;
      if (st && it != entries_.end()) {
        it->file = path;
        disk_used_ += it->bytes;
        EvictDiskLocked(&doomed);
      } else if (st) {
        doomed.push_back(path);  // erased while it was being written
      } else if (it != entries_.end() && !it->state) {
        entries_.erase(it);  // out of RAM already, and not on disk: gone
      }
      UpdateGaugesLocked();
    }
    cv_.notify_all();
    Delete(doomed);
  }
}

void PromptCache::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !disk_on_ || (writes_.empty() && writes_in_flight_ == 0); });
}

double PromptCache::RestoreSecondsPerToken(CacheTier tier) const {
  std::lock_guard<std::mutex> lock(mu_);
  return restore_s_per_token_[static_cast<int>(tier)];
}

void PromptCache::RecordRestore(CacheTier tier, size_t tokens, double seconds) {
  if (tier == CacheTier::kNone || tokens == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    double& r = restore_s_per_token_[static_cast<int>(tier)];
    r += 0.3 * (seconds / tokens - r);
  }
  if (!metrics_) return;
  metrics_->Add(TierMetric(tier, "hits_total"), model_);
  metrics_->Add(TierMetric(tier, "restored_tokens_total"), model_, static_cast<double>(tokens));
  metrics_->Observe(TierMetric(tier, "restore_seconds"), model_, seconds);
}

std::vector<CacheEntryInfo> PromptCache::List() const {
  std::vector<CacheEntryInfo> out;
  const auto now_wall = WallClock::now();
  const auto now = SteadyClock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    CacheEntryInfo i;
    i.scope = e.scope;
    i.tokens = e.tokens.size();
    i.bytes = e.bytes;
    i.tier = e.state ? CacheTier::kRam : CacheTier::kDisk;
    i.on_disk = !e.file.empty();
    i.age_s = std::chrono::duration<double>(now_wall - e.created).count();
    i.idle_s = std::chrono::duration<double>(now - e.used).count();
    out.push_back(std::move(i));
  }
  return out;
}

void PromptCache::Clear() {
  Flush();  // a write in flight would otherwise land after the clear
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!entries_.empty()) EraseLocked(entries_.begin(), &doomed);
    UpdateGaugesLocked();
  }
  Delete(doomed);
}

uint64_t PromptCache::ram_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ram_used_;
}

uint64_t PromptCache::disk_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disk_used_;
}

void PromptCache::UpdateGaugesLocked() {
  if (!metrics_) return;
  metrics_->Set(TierMetric(CacheTier::kRam, "bytes"), model_, static_cast<double>(ram_used_));
  metrics_->Set(TierMetric(CacheTier::kDisk, "bytes"), model_, static_cast<double>(disk_used_));
}

void PromptCache::Delete(const std::vector<std::string>& files) {
  std::error_code ec;
  for (const auto& f : files) fs::remove(f, ec);
}

}  // namespace hone::serve
