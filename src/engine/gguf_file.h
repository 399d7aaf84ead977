// Reads a GGUF file's header, metadata and tensor table without loading any
// weights: fast (milliseconds), and the first line of defence against bad files.
// Validates what llama.cpp would otherwise report only by aborting or logging.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::engine {

struct TensorInfo {
  std::string name;
  std::string type;            // ggml type name: "f16", "q4_K", ...
  std::vector<int64_t> shape;  // ne[0..n_dims)
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

struct TypeShare {
  int tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct GgufFile {
  std::string path;
  uint64_t file_bytes = 0;
  uint32_t version = 0;
  std::string architecture;                     // general.architecture
  std::map<std::string, std::string> metadata;  // scalars as text; arrays as "[N items]"
  std::vector<TensorInfo> tensors;
  std::map<std::string, TypeShare> type_histogram;  // by ggml type name

  uint64_t n_params() const;
  uint64_t tensor_bytes() const;
  double bits_per_weight() const;
  // Integer/float metadata "<arch>.<key>"; nullopt when absent.
  std::optional<int64_t> ArchInt(const std::string& key) const;
  std::optional<double> ArchFloat(const std::string& key) const;
  std::optional<std::string> Get(const std::string& key) const;
};

// Errors: kNotFound (no such file), kCorrupt (not a GGUF, truncated, bad table),
// kIo (unreadable).
Result<GgufFile> ReadGguf(const std::string& path);

}  // namespace hone::engine
