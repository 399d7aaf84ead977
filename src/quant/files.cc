#include "quant/files.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

namespace hone::quant {
namespace fs = std::filesystem;

Result<std::string> HashFile(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) return MakeError(ErrorCode::kNotFound, "cannot read " + path);
  auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  static std::mutex mu;                            // guards memo
  static std::map<std::string, std::string> memo;  // GUARDED_BY(mu): path|size|mtime -> hash
  const std::string key = path + "|" + std::to_string(size) + "|" + std::to_string(mtime);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return MakeError(ErrorCode::kIo, "cannot open " + path);
  // Four independent 64-bit multiply-xorshift lanes over 8-byte words: fast
  // enough to hash a 1 GB model in well under a second, not cryptographic.
  uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                   0x27D4EB2F165667C5ull};
  std::vector<uint64_t> buf(1 << 17);
  size_t n;
  uint64_t total = 0;
  while ((n = std::fread(buf.data(), 1, buf.size() * 8, f)) > 0) {
    if (n % 8)
      std::fill(reinterpret_cast<char*>(buf.data()) + n,
                reinterpret_cast<char*>(buf.data()) + (n + 7) / 8 * 8, 0);
    const size_t words = (n + 7) / 8;
    for (size_t i = 0; i < words; ++i) {
      uint64_t& x = h[i & 3];
      x = (x ^ buf[i]) * 0x9FB21C651E98DF25ull;
      x ^= x >> 29;
    }
    total += n;
  }
  std::fclose(f);
  uint64_t r = total;
  for (uint64_t x : h) r = (r ^ x) * 0xFF51AFD7ED558CCDull, r ^= r >> 32;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  std::lock_guard<std::mutex> lock(mu);
  memo[key] = hex;
  return std::string(hex);
}

std::string HashString(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string QuantizedName(const std::string& src, const std::string& type, const std::string& out_dir) {
  fs::path p(src);
  std::string stem = p.stem().string();  // without .gguf
  // Drop a trailing precision tag: "qwen2.5-0.5b.f16" -> "qwen2.5-0.5b".
  auto dot = stem.rfind('.');
  if (dot != std::string::npos) {
    std::string tag = stem.substr(dot + 1);
    for (char& c : tag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (tag == "f16" || tag == "f32" || tag == "bf16") stem.resize(dot);
  }
  fs::path dir = out_dir.empty() ? p.parent_path() : fs::path(out_dir);
  return (dir / (stem + "." + type + ".gguf")).string();
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status WriteTextAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return MakeError(ErrorCode::kIo, "cannot write " + tmp);
    f << text;
    if (!f) return MakeError(ErrorCode::kIo, "cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

Status CheckDefaultOutputDir(const std::string& dir, const std::string& flag) {
  const std::string d = dir.empty() ? "." : dir;
  struct stat st {};
  struct statvfs vfs {};
  const bool no_write_bits = stat(d.c_str(), &st) == 0 && (st.st_mode & 0222) == 0;
  const bool read_only_mount = statvfs(d.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
  if (no_write_bits || read_only_mount) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the source's folder " + d + " is read-only; choose where the output goes with " + flag);
  }
  return Status::Ok();
}

}  // namespace hone::quant
