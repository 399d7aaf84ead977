// The prompt cache beyond the slots: the KV state of token prefixes that
// left a slot, kept in host RAM and on disk, so a conversation that comes
// back after its slot went to others prefills only its new turn.
//
//   slot reused ──Put──> RAM tier (LRU by bytes, --cache-ram)
//                          │  written behind to disk at once (when the disk
//                          │  tier is on), so a restart or a reload finds it
//                          v
//                        disk tier (LRU by bytes, --cache-disk), one file an
//                          entry (serve/prompt_cache_file.h)
//   a new request ──Find──> the longest prefix of its prompt in its scope
//                  ──Load──> the state bytes, restored into its slot
//
// Scopes: an entry is restored only for requests of the same scope (the
// client key's tenant, or a cache_salt), so one tenant can never time
// another's prompts. An entry whose tokens are a prefix of a longer entry
// in the same scope is not kept twice. One PromptCache per loaded model;
// a model's folder holds entries of its current key only (another key's
// files are deleted when the cache opens: a replaced model file).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serve/cache_ram_limit.h"
#include "serve/metrics.h"
#include "util/result.h"

namespace hone::serve {

enum class CacheTier { kNone, kRam, kDisk };
const char* CacheTierName(CacheTier t);  // "none", "ram", "disk"

struct PromptCacheOptions {
  uint64_t ram_bytes = 0;  // RAM tier budget; 0: no RAM tier (entries go straight to disk)
  // The server's one RAM budget, shared by every model's cache; null: a
  // budget of ram_bytes for this cache alone.
  std::shared_ptr<CacheRamLimit> ram_limit;
  uint64_t disk_bytes = 0;  // disk tier budget; 0: no disk tier
  std::string dir;          // the disk tier's folder for this model (created if missing)
  // Whatever changes the state's bytes: model file hash, llama.cpp commit,
  // KV types, attention layout. An entry with another key is never restored.
  std::string key;
  size_t min_tokens = 32;  // shorter prefixes are cheaper to prefill than to keep
};

// What Find found: the entry and how much of the prompt it holds.
struct CacheMatch {
  CacheTier tier = CacheTier::kNone;
  uint64_t id = 0;
  size_t tokens = 0;        // prompt tokens the entry holds (its common prefix with the prompt)
  size_t entry_tokens = 0;  // the entry's own length: restoring costs all of it
};

struct CacheEntryInfo {
  std::string scope;
  size_t tokens = 0;
  uint64_t bytes = 0;
  CacheTier tier = CacheTier::kNone;  // kRam when in RAM (and maybe on disk too)
  bool on_disk = false;
  double age_s = 0;   // since it was stored
  double idle_s = 0;  // since it was last stored or restored
};

class PromptCache {
 public:
  using Token = int32_t;
  // Indexes the disk folder (headers only). Never fails: a folder that cannot
  // be made or read turns the disk tier off with one log line.
  PromptCache(PromptCacheOptions options, Metrics* metrics, std::string model_name);
  ~PromptCache();  // writes what is queued, then stops the writer
  PromptCache(const PromptCache&) = delete;
  PromptCache& operator=(const PromptCache&) = delete;

  // The entry of `scope` sharing the longest prefix with `prompt`, or a
  // match with tier kNone. Thread-safe (the forecast calls it too).
  CacheMatch Find(const std::string& scope, const std::vector<Token>& prompt) const;
  // True when an entry of `scope` already holds all of `tokens`: storing
  // them would add nothing (the caller skips copying the KV out).
  bool Covers(const std::string& scope, const std::vector<Token>& tokens) const;
  // The state bytes of a match: from RAM (or a write still queued), or read
  // and verified from disk (the file must hold this entry's scope and
  // tokens). *served says which. Null when the entry is gone or its file is
  // damaged (one log line; the file is deleted). Thread-safe.
  std::shared_ptr<const std::vector<uint8_t>> Load(const CacheMatch& m, CacheTier* served = nullptr);
  // Forgets an entry (and its file): llama.cpp refused its state.
  void Drop(uint64_t id);
  // Stores a prefix's state (drops entries it extends; skips one an entry
  // already covers). Thread-safe.
  void Put(const std::string& scope, std::vector<Token> tokens, std::vector<uint8_t> state);

  // The measured cost of restoring one entry token from a tier, seconds (a
  // guess until measured); what the scheduler weighs against prefill.
  double RestoreSecondsPerToken(CacheTier tier) const;
  void RecordRestore(CacheTier tier, size_t tokens, double seconds);

  std::vector<CacheEntryInfo> List() const;
  void Clear();  // both tiers, files included
  void Flush();  // returns once every queued write is on disk (or failed)
  uint64_t ram_bytes() const;
  uint64_t ram_limit_bytes() const { return ram_limit_->limit(); }  // shared with the other models
  uint64_t disk_bytes() const;

  // For CacheRamLimit: when this cache's least recently used RAM entry was
  // last used (none: nothing in RAM), and evicting it (false: nothing to evict).
  std::optional<std::chrono::steady_clock::time_point> OldestRamUse() const;
  bool EvictOldestRam();
  const PromptCacheOptions& options() const { return opt_; }

 private:
  struct Entry {
    uint64_t id = 0;
    std::string scope;
    std::vector<Token> tokens;
    std::shared_ptr<const std::vector<uint8_t>> state;  // null: not in RAM
    uint64_t bytes = 0;                                 // state size
    std::string file;                                   // empty: not on disk (yet)
    bool writing = false;                               // queued for the writer
    std::chrono::system_clock::time_point created;
    std::chrono::steady_clock::time_point used;
  };
  struct Write {
    uint64_t id;
    std::string scope;
    std::vector<Token> tokens;
    std::shared_ptr<const std::vector<uint8_t>> state;
    int64_t created_ms;
  };
  void IndexDisk();
  void WriterLoop();
  std::string PathFor(uint64_t id) const;
  // The four below need mu_.
  std::list<Entry>::iterator FindId(uint64_t id);
  uint64_t NewIdLocked();  // random: two caches on one folder (a reload racing an unload) never share a name
  void EvictRamLocked(std::list<Entry>::iterator it);  // moves one entry out of RAM
  void AddRamLocked(int64_t bytes);                    // ram_used_ and the shared limit
  // Files to delete (outside the lock) for disk entries beyond the budget.
  void EvictDiskLocked(std::vector<std::string>* doomed);
  void EraseLocked(std::list<Entry>::iterator it, std::vector<std::string>* doomed);
  void UpdateGaugesLocked();
  void Delete(const std::vector<std::string>& files);

  const PromptCacheOptions opt_;
  const std::shared_ptr<CacheRamLimit> ram_limit_;
  Metrics* metrics_;
  const std::string model_;
  bool disk_on_ = false;  // set once in the constructor

  // mu_ guards everything below it, the writer's queue included. Never held
  // across file I/O or a KV copy: Find (the forecast) must stay cheap.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the writer waits for work; Flush for an empty queue
  std::list<Entry> entries_;    // most recently used at the back
  std::mt19937_64 ids_{std::random_device{}()};
  uint64_t ram_used_ = 0, disk_used_ = 0;
  std::deque<Write> writes_;
  int writes_in_flight_ = 0;
  uint64_t queued_bytes_ = 0;  // state bytes in writes_ (held beside the RAM tier)
  bool stopping_ = false;
  double restore_s_per_token_[3] = {0, 2e-6, 2e-5};  // by tier: guesses until measured
  // The writer thread's own: when it last logged a failed write, and how many failed since.
  std::chrono::steady_clock::time_point last_write_error_log_{};
  int write_errors_unlogged_ = 0;
  std::thread writer_;
};

// A request's scope: its cache_salt (hashed, never stored in clear) when it
// has one, else its tenant ("" on a server without keys).
std::string CacheScope(const std::string& tenant, const std::string& cache_salt);

}  // namespace hone::serve
