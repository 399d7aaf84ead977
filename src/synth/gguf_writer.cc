#include "synth/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ggml.h"
#include "gguf.h"

namespace hone::synth {

GgufStreamWriter::GgufStreamWriter(std::string path) : path_(std::move(path)), part_(path_ + ".part") {}

GgufStreamWriter::~GgufStreamWriter() {
  if (file_) std::fclose(file_);
  if (!finished_ && !part_.empty()) {
    std::error_code ec;
    std::filesystem::remove(part_, ec);
  }
}

Status GgufStreamWriter::WriteMetadata(const gguf_context* ctx) {
  file_ = std::fopen(part_.c_str(), "wb");
  if (!file_) return IoError("cannot create");
  // gguf_write_to_file_ptr pads the metadata to the alignment, so the data
  // section starts right where it stops.
  if (!gguf_write_to_file_ptr(ctx, file_, /*only_meta=*/true)) return IoError("cannot write metadata to");
  const long pos = std::ftell(file_);
  if (pos < 0) return IoError("cannot tell position in");
  written_ = data_offset_ = static_cast<uint64_t>(pos);
  alignment_ = gguf_get_alignment(ctx);
  return Status::Ok();
}

Status GgufStreamWriter::BeginTensor(const gguf_context* ctx, int64_t tensor_id) {
  const uint64_t offset = data_offset_ + gguf_get_tensor_offset(ctx, tensor_id);
  if (written_ > offset) {
    return MakeError(ErrorCode::kInternal, std::string("tensor '") + gguf_get_tensor_name(ctx, tensor_id) +
                                               "' starts before the bytes already written");
  }
  return PadTo(offset);
}

Status GgufStreamWriter::Write(const void* data, size_t n) {
  if (std::fwrite(data, 1, n, file_) != n) return IoError("cannot write");
  written_ += n;
  return Status::Ok();
}

Status GgufStreamWriter::Finish() {
  // gguf's own writer pads after the last tensor too.
  Status s = PadTo(data_offset_ + GGML_PAD(written_ - data_offset_, alignment_));
  if (!s.ok()) return s;
  const int rc = std::fclose(file_);  // reports a full disk that buffered writes hid
  file_ = nullptr;
  if (rc != 0) return IoError("cannot finish writing");
  std::error_code ec;
  std::filesystem::rename(part_, path_, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot rename " + part_ + " to " + path_ + ": " + ec.message());
  finished_ = true;
  return Status::Ok();
}

Status GgufStreamWriter::PadTo(uint64_t offset) {
  static const char kZeros[256] = {};
  while (written_ < offset) {
    Status s = Write(kZeros, std::min<uint64_t>(sizeof(kZeros), offset - written_));
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Error GgufStreamWriter::IoError(const std::string& what) const {
  return MakeError(ErrorCode::kIo, what + " '" + part_ + "': " + std::strerror(errno));
}

}  // namespace hone::synth
