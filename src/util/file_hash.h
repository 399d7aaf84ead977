// Content keys: FNV-1a 64 for small buffers, and a fast key for model files
// that profiles and the prompt cache both use to notice a replaced model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/result.h"

namespace hone {

struct Fnv1a {
  uint64_t h = 0xcbf29ce484222325ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  void Add(const std::string& s) { Add(s.data(), s.size()); }
  std::string Hex() const;  // 16 lower-case hex digits
};

// A fast content key for a model file: FNV-1a 64 over the size, the first MiB
// (the GGUF header and metadata), 32 evenly spaced 64 KiB blocks and the last
// 64 KiB. Hashing every byte of a multi-GB file would take seconds at each
// load; re-quantizing or editing a model changes the header or the sampled
// blocks. Errors: kNotFound, kIo.
Result<std::string> ModelFileHash(const std::string& path);

}  // namespace hone
