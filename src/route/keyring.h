// API keys of one upstream, spread over the healthy ones. A 429 cools a key
// down for its Retry-After; a 401 or 403 takes it out of rotation until the
// config is reloaded (with an alert line). A key is named in logs, metrics
// and /hone/routes only by its fingerprint, never by its text.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hone::route {

// "key-" + the first 8 hex digits of the key's SHA-256.
std::string KeyFingerprint(const std::string& key);
// The SHA-256 of `text` in lower-case hex (64 digits).
std::string Sha256Hex(const std::string& text);

enum class KeyHealth { kOk, kCooling, kRevoked };
const char* KeyHealthName(KeyHealth h);  // "ok", "cooling", "revoked"

struct KeyView {
  std::string fingerprint;
  KeyHealth health = KeyHealth::kOk;
  double available_in_s = 0;  // cooling: seconds left
  std::string why;            // revoked: "HTTP 401"
  long long uses = 0;
};

class KeyRing {
 public:
  using ClockFn = std::function<double()>;
  explicit KeyRing(std::vector<std::string> keys, ClockFn clock = {});

  struct Pick {
    size_t index;
    std::string key;
    std::string fingerprint;
    int generation = 0;  // which key list it came from (Replace starts a new one)
    uint64_t release = 0;  // the key queue's number for this release (key_queue.h)
  };
  // The next key in rotation that is neither cooling nor revoked. With no
  // keys configured at all, a pick with an empty key (an upstream without
  // authentication). nullopt when every key is unusable now.
  std::optional<Pick> Next();
  // Reports on a pick; ignored when the list was replaced since.
  void RateLimited(const Pick& p, double retry_after_s);
  void Rejected(const Pick& p, int http_status);
  // A config reload: the new list, every key usable again.
  void Replace(std::vector<std::string> keys);
  // `text` with every current key replaced by its fingerprint.
  std::string Redact(std::string text);
  bool empty();
  bool AllRevoked();
  // Seconds until the first cooling key is usable again (0 if one is usable now).
  double SoonestAvailable();
  std::vector<KeyView> Snapshot();

  // For the wait queue (key_queue.h), which picks the key itself.
  struct KeyState {
    bool revoked = false;
    double cool_until = 0;  // on Now()'s clock
  };
  // Every key's state; returns the list's generation.
  int States(std::vector<KeyState>* out);
  // Key `index` of list `generation`, if it is usable now (counted as a use).
  std::optional<Pick> Take(size_t index, int generation);
  // The clock cooldowns are kept on, in seconds.
  double Now() const;

 private:
  struct Key {
    std::string text;
    std::string fingerprint;
    double cool_until = 0;
    bool revoked = false;
    std::string why;
    long long uses = 0;
  };
  ClockFn clock_;
  std::mutex mu_;
  std::vector<Key> keys_;  // GUARDED_BY(mu_)
  size_t next_ = 0;        // GUARDED_BY(mu_)
  int generation_ = 0;     // GUARDED_BY(mu_)
};

}  // namespace hone::route
