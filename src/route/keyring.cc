#include "route/keyring.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>

namespace hone::route {

std::string Sha256Hex(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string KeyFingerprint(const std::string& key) { return "key-" + Sha256Hex(key).substr(0, 8); }

const char* KeyHealthName(KeyHealth h) {
  switch (h) {
    case KeyHealth::kOk:
      return "ok";
    case KeyHealth::kCooling:
      return "cooling";
    case KeyHealth::kRevoked:
      return "revoked";
  }
  return "?";
}

KeyRing::KeyRing(std::vector<std::string> keys, ClockFn clock) : clock_(std::move(clock)) {
  for (auto& k : keys) keys_.push_back(Key{k, KeyFingerprint(k)});
}

namespace {
double ClockNow(const KeyRing::ClockFn& clock) {
  if (clock) return clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::optional<KeyRing::Pick> KeyRing::Next() {
  std::lock_guard<std::mutex> lock(mu_);
  if (keys_.empty()) return Pick{0, "", "", generation_};
  const double now = ClockNow(clock_);
  for (size_t tried = 0; tried < keys_.size(); ++tried) {
    size_t i = (next_ + tried) % keys_.size();
    Key& k = keys_[i];
    if (k.revoked || k.cool_until > now) continue;
    next_ = (i + 1) % keys_.size();
    ++k.uses;
    return Pick{i, k.text, k.fingerprint, generation_};
  }
  return std::nullopt;
}

void KeyRing::RateLimited(const Pick& p, double retry_after_s) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t index = p.index;
  if (p.generation != generation_ || index >= keys_.size()) return;
  keys_[index].cool_until = ClockNow(clock_) + (retry_after_s > 0 ? retry_after_s : 1.0);
}

void KeyRing::Rejected(const Pick& p, int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t index = p.index;
  if (p.generation != generation_ || index >= keys_.size() || keys_[index].revoked) return;
  keys_[index].revoked = true;
  keys_[index].why = "HTTP " + std::to_string(http_status);
  std::fprintf(stderr, "[hone] ALERT upstream key %s rejected with HTTP %d: out of rotation until reload\n",
               keys_[index].fingerprint.c_str(), http_status);
}

void KeyRing::Replace(std::vector<std::string> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  keys_.clear();
  for (auto& k : keys) keys_.push_back(Key{k, KeyFingerprint(k)});
  next_ = 0;
  ++generation_;
}

std::string KeyRing::Redact(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Key& k : keys_) {
    if (k.text.size() < 4) continue;
    for (size_t at; (at = text.find(k.text)) != std::string::npos;)
      text.replace(at, k.text.size(), k.fingerprint);
  }
  return text;
}

bool KeyRing::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_.empty();
}

bool KeyRing::AllRevoked() {
  std::lock_guard<std::mutex> lock(mu_);
  if (keys_.empty()) return false;
  for (const Key& k : keys_)
    if (!k.revoked) return false;
  return true;
}

double KeyRing::SoonestAvailable() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = ClockNow(clock_);
  double best = -1;
  for (const Key& k : keys_) {
    if (k.revoked) continue;
    double wait = k.cool_until > now ? k.cool_until - now : 0;
    if (best < 0 || wait < best) best = wait;
  }
  return best < 0 ? 0 : best;
}

int KeyRing::States(std::vector<KeyState>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->clear();
  for (const Key& k : keys_) out->push_back(KeyState{k.revoked, k.cool_until});
  return generation_;
}

std::optional<KeyRing::Pick> KeyRing::Take(size_t index, int generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_ || index >= keys_.size()) return std::nullopt;
  Key& k = keys_[index];
  if (k.revoked || k.cool_until > ClockNow(clock_)) return std::nullopt;
  ++k.uses;
  return Pick{index, k.text, k.fingerprint, generation_};
}

double KeyRing::Now() const { return ClockNow(clock_); }

std::vector<KeyView> KeyRing::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = ClockNow(clock_);
  std::vector<KeyView> out;
  for (const Key& k : keys_) {
    KeyView v;
    v.fingerprint = k.fingerprint;
    v.uses = k.uses;
    if (k.revoked) {
      v.health = KeyHealth::kRevoked;
      v.why = k.why;
    } else if (k.cool_until > now) {
      v.health = KeyHealth::kCooling;
      v.available_in_s = k.cool_until - now;
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace hone::route
