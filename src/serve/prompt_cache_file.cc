#include "serve/prompt_cache_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

namespace hone::serve {
namespace {

constexpr char kMagic[8] = {'H', 'O', 'N', 'E', 'K', 'V', '\0', '\1'};
constexpr uint32_t kMaxHeader = 1 << 20;  // a header is a few hundred bytes; more is damage

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

Error IoError(const std::string& what, const std::string& path) {
  return MakeError(ErrorCode::kIo, what + " " + path + ": " + std::strerror(errno));
}

Error Corrupt(const std::string& path, const std::string& why) {
  return MakeError(ErrorCode::kCorrupt, "prompt cache file " + path + " is damaged: " + why);
}

std::string HeaderJson(const CacheFileHeader& h) {
  nlohmann::json j = {{"key", h.key},
                      {"scope", h.scope},
                      {"tokens", h.tokens.size()},
                      {"state_bytes", h.state_bytes},
                      {"created_ms", h.created_ms}};
  return j.dump();
}

// Feeds the checksum as the bytes are written, so the file is written in one pass.
class ChecksumWriter {
 public:
  explicit ChecksumWriter(std::FILE* f) : f_(f) {}
  bool Write(const void* p, size_t n) {
    sum_ = PromptCacheChecksum(static_cast<const uint8_t*>(p), n, sum_);
    return std::fwrite(p, 1, n, f_) == n;
  }
  uint64_t sum() const { return sum_; }

 private:
  std::FILE* f_;
  uint64_t sum_ = 0;
};

}  // namespace

uint64_t PromptCacheChecksum(const uint8_t* data, size_t n, uint64_t seed) {
  // Chunks are hashed on their own and chained, so a file written in pieces
  // and read in one gets the same sum only if the pieces are fed the same way:
  // both sides feed magic, length, header, tokens and state as separate calls.
  uint64_t h = seed ^ (0x9e3779b97f4a7c15ull * (n + 1));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

Status WriteCacheFile(const std::string& path, const CacheFileHeader& header,
                      const std::vector<uint8_t>& state) {
  const std::string tmp = path + ".tmp";
  // 0600: every tenant's conversation is in these files. O_NOFOLLOW: a link
  // planted in a shared folder must not redirect the write.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot create", tmp);
  File f(::fdopen(fd, "wb"));
  if (!f) {
    ::close(fd);
    return IoError("cannot create", tmp);
  }
  const std::string json = HeaderJson(header);
  const auto hlen = static_cast<uint32_t>(json.size());
  ChecksumWriter w(f.get());
  bool ok = w.Write(kMagic, sizeof(kMagic)) && w.Write(&hlen, sizeof(hlen)) &&
            w.Write(json.data(), json.size()) &&
            w.Write(header.tokens.data(), header.tokens.size() * sizeof(int32_t)) &&
            w.Write(state.data(), state.size());
  const uint64_t sum = w.sum();
  ok = ok && std::fwrite(&sum, 1, sizeof(sum), f.get()) == sizeof(sum);
  ok = ok && std::fflush(f.get()) == 0;
  if (!ok) {
    Error e = IoError("cannot write", tmp);
    f.reset();
    std::remove(tmp.c_str());
    return e;
  }
  f.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = IoError("cannot rename to", path);
    std::remove(tmp.c_str());
    return e;
  }
  return Status::Ok();
}

namespace {

// Reads magic, header and tokens; leaves the file at the state.
Result<CacheFileHeader> ReadHeaderFrom(std::FILE* f, const std::string& path, uint64_t file_size,
                                       std::string* json_out) {
  char magic[8];
  uint32_t hlen = 0;
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    return Corrupt(path, "bad magic");
  if (std::fread(&hlen, 1, 4, f) != 4 || hlen == 0 || hlen > kMaxHeader)
    return Corrupt(path, "bad header length");
  std::string json(hlen, '\0');
  if (std::fread(json.data(), 1, hlen, f) != hlen) return Corrupt(path, "truncated header");
  CacheFileHeader h;
  try {
    auto j = nlohmann::json::parse(json);
    h.key = j.at("key").get<std::string>();
    h.scope = j.at("scope").get<std::string>();
    const uint64_t n_tokens = j.at("tokens").get<uint64_t>();
    h.state_bytes = j.at("state_bytes").get<uint64_t>();
    h.created_ms = j.at("created_ms").get<int64_t>();
    // Before any allocation: a damaged count must not ask for gigabytes.
    if (n_tokens > file_size / 4 || h.state_bytes > file_size)
      return Corrupt(path, "counts larger than the file");
    h.tokens.resize(n_tokens);
  } catch (const std::exception& e) {
    return Corrupt(path, std::string("bad header: ") + e.what());
  }
  const uint64_t expect = 8 + 4 + uint64_t{hlen} + h.tokens.size() * 4 + h.state_bytes + 8;
  if (expect != file_size) {
    return Corrupt(path,
                   "size " + std::to_string(file_size) + " bytes, the header says " + std::to_string(expect));
  }
  const size_t tb = h.tokens.size() * sizeof(int32_t);
  if (std::fread(h.tokens.data(), 1, tb, f) != tb) return Corrupt(path, "truncated tokens");
  if (json_out) *json_out = std::move(json);
  return h;
}

Result<uint64_t> FileSize(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot read " + path + ": " + ec.message());
  return size;
}

}  // namespace

Result<CacheFileHeader> ReadCacheFileHeader(const std::string& path) {
  auto size = FileSize(path);
  if (!size) return size.error();
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return IoError("cannot open", path);
  return ReadHeaderFrom(f.get(), path, *size, nullptr);
}

Result<std::vector<uint8_t>> ReadCacheFileState(const std::string& path, const std::string& key,
                                                CacheFileHeader* header) {
  auto size = FileSize(path);
  if (!size) return size.error();
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return IoError("cannot open", path);
  std::string json;
  auto h = ReadHeaderFrom(f.get(), path, *size, &json);
  if (!h) return h.error();
  if (h->key != key) return Corrupt(path, "it belongs to another model or build");
  std::vector<uint8_t> state(h->state_bytes);
  uint64_t stored = 0;
  if (std::fread(state.data(), 1, state.size(), f.get()) != state.size() ||
      std::fread(&stored, 1, sizeof(stored), f.get()) != sizeof(stored)) {
    return Corrupt(path, "truncated state");
  }
  const auto hlen = static_cast<uint32_t>(json.size());
  uint64_t sum = PromptCacheChecksum(reinterpret_cast<const uint8_t*>(kMagic), sizeof(kMagic), 0);
  sum = PromptCacheChecksum(reinterpret_cast<const uint8_t*>(&hlen), sizeof(hlen), sum);
  sum = PromptCacheChecksum(reinterpret_cast<const uint8_t*>(json.data()), json.size(), sum);
  sum = PromptCacheChecksum(reinterpret_cast<const uint8_t*>(h->tokens.data()), h->tokens.size() * 4, sum);
  sum = PromptCacheChecksum(state.data(), state.size(), sum);
  if (sum != stored) return Corrupt(path, "checksum mismatch");
  if (header) *header = std::move(*h);
  return state;
}

}  // namespace hone::serve
