#include "util/file_hash.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace hone {

std::string Fnv1a::Hex() const {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

Result<std::string> ModelFileHash(const std::string& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return MakeError(ErrorCode::kNotFound, "cannot read model file " + path + ": " + ec.message());
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError(ErrorCode::kIo, "cannot open " + path);
  Fnv1a fnv;
  fnv.Add(&size, sizeof(size));
  std::vector<char> buf(1 << 20);
  auto read_at = [&](uint64_t off, size_t n) {
    n = static_cast<size_t>(std::min<uint64_t>(n, size - std::min(off, size)));
    f.clear();
    f.seekg(static_cast<std::streamoff>(off));
    f.read(buf.data(), static_cast<std::streamsize>(n));
    fnv.Add(buf.data(), static_cast<size_t>(f.gcount()));
  };
  read_at(0, 1 << 20);
  constexpr int kBlocks = 32;
  constexpr size_t kBlock = 64 << 10;
  for (int i = 1; i <= kBlocks; ++i) read_at(size / (kBlocks + 1) * i, kBlock);
  if (size > kBlock) read_at(size - kBlock, kBlock);
  return fnv.Hex();
}

}  // namespace hone
