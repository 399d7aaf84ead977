#include "engine/imatrix.h"

#include <ggml-backend.h>
#include <ggml.h>
#include <gguf.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace hone::engine {
namespace {

// Graph nodes carry names like "blk.0.attn_q.weight (reshaped)" or
// "CUDA0#blk.0.attn_q.weight#0"; the weight's own name is the part between '#'.
std::string WeightName(const char* name) {
  const char* p = std::strchr(name, '#');
  if (!p) return name;
  ++p;
  const char* q = std::strchr(p, '#');
  return q ? std::string(p, q - p) : std::string(p);
}

}  // namespace

bool ImatrixCollector::Callback(ggml_tensor* t, bool ask, void* user_data) {
  auto* self = static_cast<ImatrixCollector*>(user_data);
  if (ask) {
    // Only dense matrix products of layer weights with enough rows: llama-imatrix
    // skips batches under 16 tokens (sampling steps), and so do we.
    if (t->op != GGML_OP_MUL_MAT) return false;
    const ggml_tensor* src1 = t->src[1];
    if (src1->ne[1] < 16 || src1->type != GGML_TYPE_F32) return false;
    return WeightName(t->src[0]->name).rfind("blk.", 0) == 0;
  }
  return self->Collect(t);
}

bool ImatrixCollector::Collect(ggml_tensor* t) {
  const ggml_tensor* src0 = t->src[0];
  const ggml_tensor* src1 = t->src[1];
  const std::string name = WeightName(src0->name);
  std::lock_guard<std::mutex> lock(mu_);
  const char* data = static_cast<const char*>(src1->data);
  if (!ggml_backend_buffer_is_host(src1->buffer)) {
    scratch_.resize(ggml_nbytes(src1));
    ggml_backend_tensor_get(src1, scratch_.data(), 0, scratch_.size());
    data = scratch_.data();
  }
  const int64_t ne0 = src1->ne[0];
  const int64_t n_mat = src0->ne[2] * src0->ne[3];
  Entry& e = entries_[name];
  if (e.sums.empty()) {
    e.sums.assign(ne0 * n_mat, 0.0);
    e.counts.assign(1, 0);
  }
  if (e.sums.size() != static_cast<size_t>(ne0 * n_mat))
    return true;  // inconsistent shape: ignore, never abort
  for (int64_t i3 = 0; i3 < src1->ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < src1->ne[2]; ++i2) {
      const int64_t mat = (i3 % src0->ne[3]) * src0->ne[2] + (i2 % src0->ne[2]);
      double* acc = e.sums.data() + mat * ne0;
      for (int64_t row = 0; row < src1->ne[1]; ++row) {
        const float* x =
            reinterpret_cast<const float*>(data + row * src1->nb[1] + i2 * src1->nb[2] + i3 * src1->nb[3]);
        for (int64_t j = 0; j < ne0; ++j) acc[j] += static_cast<double>(x[j]) * x[j];
      }
    }
  }
  e.counts[0] += ggml_nrows(src1) / n_mat;
  return true;
}

Status ImatrixCollector::Write(const std::string& path, const std::vector<std::string>& datasets,
                               int chunk_count, int chunk_size) const {
  if (entries_.empty()) return MakeError(ErrorCode::kInternal, "no activations were collected");
  size_t data_size = 0;
  for (const auto& [name, e] : entries_) {
    data_size += GGML_PAD(ggml_tensor_overhead() + sizeof(float) * e.sums.size(), GGML_MEM_ALIGN);
    data_size += GGML_PAD(ggml_tensor_overhead() + sizeof(float) * e.counts.size(), GGML_MEM_ALIGN);
  }
  ggml_init_params ip = {data_size, nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  gguf_context* g = gguf_init_empty();
  std::vector<const char*> ds;
  for (const auto& d : datasets) ds.push_back(d.c_str());
  gguf_set_val_str(g, "general.type", "imatrix");
  gguf_set_arr_str(g, "imatrix.datasets", ds.data(), ds.size());
  gguf_set_val_u32(g, "imatrix.chunk_count", static_cast<uint32_t>(chunk_count));
  gguf_set_val_u32(g, "imatrix.chunk_size", static_cast<uint32_t>(chunk_size));
  for (const auto& [name, e] : entries_) {  // std::map: sorted, deterministic order
    const int64_t nmat = static_cast<int64_t>(e.counts.size());
    ggml_tensor* sums = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, e.sums.size() / nmat, nmat);
    ggml_tensor* counts = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, nmat);
    ggml_format_name(sums, "%s.in_sum2", name.c_str());
    ggml_format_name(counts, "%s.counts", name.c_str());
    for (size_t j = 0; j < e.sums.size(); ++j)
      static_cast<float*>(sums->data)[j] = static_cast<float>(e.sums[j]);
    for (int64_t j = 0; j < nmat; ++j) static_cast<float*>(counts->data)[j] = static_cast<float>(e.counts[j]);
    gguf_add_tensor(g, sums);
    gguf_add_tensor(g, counts);
  }
  bool ok = gguf_write_to_file(g, path.c_str(), false);
  gguf_free(g);
  ggml_free(ctx);
  if (!ok) return MakeError(ErrorCode::kIo, "cannot write " + path);
  return Status::Ok();
}

Result<ImatrixData> ReadImatrix(const std::string& path) {
  if (!std::filesystem::exists(path)) return MakeError(ErrorCode::kNotFound, "no such imatrix file: " + path);
  ggml_context* ctx = nullptr;
  gguf_init_params gp = {false, &ctx};
  gguf_context* g = gguf_init_from_file(path.c_str(), gp);
  if (!g) return MakeError(ErrorCode::kCorrupt, path + " is not a GGUF imatrix file");
  std::map<std::string, std::pair<const ggml_tensor*, const ggml_tensor*>> pairs;
  for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
    std::string n = t->name;
    auto strip = [&](const std::string& suf) {
      if (n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0) {
        n.resize(n.size() - suf.size());
        return true;
      }
      return false;
    };
    if (t->type != GGML_TYPE_F32) continue;
    if (strip(".in_sum2"))
      pairs[n].first = t;
    else if (strip(".counts"))
      pairs[n].second = t;
  }
  ImatrixData out;
  for (const auto& [name, p] : pairs) {
    if (!p.first || !p.second) continue;
    const int64_t nval = ggml_nelements(p.first), ncounts = ggml_nelements(p.second);
    const int64_t ne0 = nval / ncounts;
    std::vector<float>& v = out[name];
    v.resize(nval);
    for (int64_t j = 0; j < ncounts; ++j) {
      const float c = static_cast<const float*>(p.second->data)[j];
      for (int64_t i = 0; i < ne0; ++i) {
        v[j * ne0 + i] = c > 0 ? static_cast<const float*>(p.first->data)[j * ne0 + i] / c : 1.0f;
      }
    }
  }
  gguf_free(g);
  ggml_free(ctx);
  if (out.empty()) return MakeError(ErrorCode::kCorrupt, path + " holds no imatrix entries");
  return out;
}

}  // namespace hone::engine
