// Streams a GGUF to disk without holding the tensor data in memory: gguf's
// own serializer writes the metadata, then the caller appends each tensor's
// bytes in order and this class inserts the alignment padding gguf expects.
// The result is byte-identical to gguf_write_to_file() on the same data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "util/result.h"

struct gguf_context;

namespace hone::synth {

class GgufStreamWriter {
 public:
  // Writes go to path + ".part", renamed to path only by Finish(), so an
  // interrupted run never leaves a file that looks complete.
  explicit GgufStreamWriter(std::string path);
  ~GgufStreamWriter();  // removes the .part file unless Finish() succeeded
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Creates the .part file and writes the header, KVs and tensor infos of `ctx`.
  Status WriteMetadata(const gguf_context* ctx);
  // Pads up to where `ctx` placed tensor `tensor_id`; then Write() its bytes.
  Status BeginTensor(const gguf_context* ctx, int64_t tensor_id);
  Status Write(const void* data, size_t n);
  // Pads the last tensor, closes and renames the file into place.
  Status Finish();

  uint64_t bytes_written() const { return written_; }

 private:
  Status PadTo(uint64_t offset);
  Error IoError(const std::string& what) const;

  std::string path_, part_;
  FILE* file_ = nullptr;
  uint64_t written_ = 0;
  uint64_t data_offset_ = 0;
  size_t alignment_ = 32;
  bool finished_ = false;
};

}  // namespace hone::synth
