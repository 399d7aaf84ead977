// File helpers for the quantization lab: content hashes (cache keys),
// output names, small JSON sidecars.
#pragma once

#include <string>

#include "util/result.h"

namespace hone::quant {

// 64-bit content hash of a file as 16 hex digits. Reads the whole file
// (about 2 GB/s); results are memoized per (path, size, mtime) in-process.
Result<std::string> HashFile(const std::string& path);

// "dir/stories260K.Q4_K_M.gguf" for "x/stories260K.gguf" (a trailing ".f16"/
// ".F32" etc. of the source stem is dropped, as in "name.f16.gguf").
std::string QuantizedName(const std::string& src, const std::string& type, const std::string& out_dir);

// 64-bit hash of a string as 16 hex digits (cache file names).
std::string HashString(const std::string& s);

std::string ReadText(const std::string& path);  // "" when unreadable
Status WriteTextAtomic(const std::string& path, const std::string& text);

}  // namespace hone::quant
