#include "engine/gguf_file.h"

#include <ggml.h>
#include <gguf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/backend.h"

namespace hone::engine {
namespace {

std::string ValueToString(const gguf_context* ctx, int64_t id) {
  switch (gguf_get_kv_type(ctx, id)) {
    case GGUF_TYPE_UINT8:
      return std::to_string(gguf_get_val_u8(ctx, id));
    case GGUF_TYPE_INT8:
      return std::to_string(gguf_get_val_i8(ctx, id));
    case GGUF_TYPE_UINT16:
      return std::to_string(gguf_get_val_u16(ctx, id));
    case GGUF_TYPE_INT16:
      return std::to_string(gguf_get_val_i16(ctx, id));
    case GGUF_TYPE_UINT32:
      return std::to_string(gguf_get_val_u32(ctx, id));
    case GGUF_TYPE_INT32:
      return std::to_string(gguf_get_val_i32(ctx, id));
    case GGUF_TYPE_UINT64:
      return std::to_string(gguf_get_val_u64(ctx, id));
    case GGUF_TYPE_INT64:
      return std::to_string(gguf_get_val_i64(ctx, id));
    case GGUF_TYPE_FLOAT32:
      return std::to_string(gguf_get_val_f32(ctx, id));
    case GGUF_TYPE_FLOAT64:
      return std::to_string(gguf_get_val_f64(ctx, id));
    case GGUF_TYPE_BOOL:
      return gguf_get_val_bool(ctx, id) ? "true" : "false";
    case GGUF_TYPE_STRING:
      return gguf_get_val_str(ctx, id);
    case GGUF_TYPE_ARRAY:
      return "[" + std::to_string(gguf_get_arr_n(ctx, id)) + " items]";
    default:
      return "?";
  }
}

// Checks the magic ourselves so "not a GGUF" is told apart from "damaged GGUF".
Status CheckMagic(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return MakeError(ErrorCode::kIo, "cannot open " + path + ": " + std::strerror(errno));
  char magic[4] = {0, 0, 0, 0};
  size_t n = std::fread(magic, 1, 4, f.get());
  if (n < 4 || std::memcmp(magic, "GGUF", 4) != 0) {
    return MakeError(ErrorCode::kCorrupt, path + " is not a GGUF file (its first bytes are not 'GGUF')");
  }
  return Status::Ok();
}

}  // namespace

uint64_t GgufFile::n_params() const {
  uint64_t n = 0;
  for (auto& t : tensors) n += t.n_elements;
  return n;
}

uint64_t GgufFile::tensor_bytes() const {
  uint64_t n = 0;
  for (auto& t : tensors) n += t.n_bytes;
  return n;
}

double GgufFile::bits_per_weight() const {
  uint64_t p = n_params();
  return p ? 8.0 * tensor_bytes() / p : 0;
}

std::optional<std::string> GgufFile::Get(const std::string& key) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> GgufFile::ArchInt(const std::string& key) const {
  auto v = Get(architecture + "." + key);
  if (!v) return std::nullopt;
  try {
    return std::stoll(*v);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<double> GgufFile::ArchFloat(const std::string& key) const {
  auto v = Get(architecture + "." + key);
  if (!v) return std::nullopt;
  try {
    return std::stod(*v);
  } catch (...) {
    return std::nullopt;
  }
}

Result<GgufFile> ReadGguf(const std::string& path) {
  EnsureBackend();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return MakeError(ErrorCode::kNotFound, "model file not found: " + path);
  if (std::filesystem::is_directory(path, ec)) {
    return MakeError(ErrorCode::kInvalidArgument, path + " is a directory, not a GGUF model file");
  }
  if (Status s = CheckMagic(path); !s) return s.error();

  GgufFile out;
  out.path = path;
  out.file_bytes = std::filesystem::file_size(path, ec);

  ggml_context* meta = nullptr;
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/&meta};
  TakeRecentLlamaErrors();
  gguf_context* ctx = gguf_init_from_file(path.c_str(), params);
  if (!ctx) {
    std::string why = TakeRecentLlamaErrors();
    return MakeError(ErrorCode::kCorrupt, path + " is a damaged GGUF file (header or metadata unreadable)" +
                                              (why.empty() ? "" : ": " + why));
  }
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> guard(ctx, &gguf_free);
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> meta_guard(meta, &ggml_free);

  out.version = gguf_get_version(ctx);
  for (int64_t i = 0; i < gguf_get_n_kv(ctx); ++i) out.metadata[gguf_get_key(ctx, i)] = ValueToString(ctx, i);
  if (auto a = out.Get("general.architecture")) out.architecture = *a;

  const uint64_t data_offset = gguf_get_data_offset(ctx);
  uint64_t data_end = data_offset;
  for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
    TensorInfo t;
    t.name = gguf_get_tensor_name(ctx, i);
    t.type = ggml_type_name(gguf_get_tensor_type(ctx, i));
    t.n_bytes = gguf_get_tensor_size(ctx, i);
    if (ggml_tensor* gt = ggml_get_tensor(meta, t.name.c_str())) {
      for (int d = 0; d < ggml_n_dims(gt); ++d) t.shape.push_back(gt->ne[d]);
      t.n_elements = ggml_nelements(gt);
    }
    data_end = std::max<uint64_t>(data_end, data_offset + gguf_get_tensor_offset(ctx, i) + t.n_bytes);
    TypeShare& share = out.type_histogram[t.type];
    share.tensors++;
    share.elements += t.n_elements;
    share.bytes += t.n_bytes;
    out.tensors.push_back(std::move(t));
  }
  // gguf_init_from_file with no_alloc does not read tensor data, so a file cut
  // short after its header would pass; llama.cpp would then fail mid-load.
  if (data_end > out.file_bytes) {
    return MakeError(ErrorCode::kCorrupt, path + " is truncated: its tensors need " +
                                              std::to_string(data_end) + " bytes but the file has " +
                                              std::to_string(out.file_bytes));
  }
  return out;
}

}  // namespace hone::engine
