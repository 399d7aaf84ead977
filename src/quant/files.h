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

// For an output folder hone picked (beside the source) rather than the user:
// kInvalidArgument, naming `flag`, when the folder is on a read-only mount or
// has no write permission bit at all. Root ignores permission bits, so
// without this check a read-only model folder (a shared one, a package's)
// would quietly receive files.
Status CheckDefaultOutputDir(const std::string& dir, const std::string& flag);

// 64-bit hash of a string as 16 hex digits (cache file names).
std::string HashString(const std::string& s);

std::string ReadText(const std::string& path);  // "" when unreadable
Status WriteTextAtomic(const std::string& path, const std::string& text);

}  // namespace hone::quant
