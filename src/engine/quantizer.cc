#include "engine/quantizer.h"

#include <llama.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/backend.h"

namespace hone::engine {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The weights llama.cpp quantizes from without --allow-requantize.
bool IsFloatType(const std::string& t) { return t == "f32" || t == "f16" || t == "bf16"; }

std::string JoinNames(const std::vector<QuantType>& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : ", ") + t.name;
  return out.empty() ? "none" : out;
}

}  // namespace

const std::vector<QuantType>& QuantTypes() {
  static const std::vector<QuantType> kTypes = {
      {"F32", LLAMA_FTYPE_ALL_F32, 1, false},
      {"F16", LLAMA_FTYPE_MOSTLY_F16, 1, false},
      {"BF16", LLAMA_FTYPE_MOSTLY_BF16, 1, false},
      {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0, 32, false},
      {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K, 256, false},
      {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M, 256, false},
      {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S, 256, false},
      {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1, 32, false},
      {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0, 32, false},
      {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M, 256, false},
      {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S, 256, false},
      {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1, 32, false},
      {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0, 32, false},
      {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL, 32, false},
      {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS, 256, false},
      {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L, 256, false},
      {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M, 256, false},
      {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S, 256, false},
      {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M, 256, false},
      {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S, 256, false},
      {"IQ3_XS", LLAMA_FTYPE_MOSTLY_IQ3_XS, 256, false},
      {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS, 256, false},
      {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K, 256, false},
      {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S, 256, true},
      {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M, 256, false},
      {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S, 256, true},
      {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS, 256, true},
      {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS, 256, true},
      {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M, 256, true},
      {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S, 256, true},
  };
  return kTypes;
}

Result<QuantType> ParseQuantType(const std::string& name) {
  std::string u = Upper(name);
  if (u == "Q4_K") u = "Q4_K_M";
  if (u == "Q5_K") u = "Q5_K_M";
  if (u == "Q3_K") u = "Q3_K_M";
  for (const auto& t : QuantTypes()) {
    if (t.name == u) return t;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown quantization type '" + name + "' (known: " + JoinNames(QuantTypes()) + ")");
}

std::vector<QuantType> SupportedQuantTypes(const GgufFile& src, bool have_imatrix) {
  bool all_float = true;
  bool any_fits_32 = false;  // some weight matrix has rows of whole 32-blocks
  for (const auto& t : src.tensors) {
    if (t.shape.size() < 2) continue;  // norms and biases stay F32 whatever the type
    if (!IsFloatType(t.type)) all_float = false;
    if (t.shape[0] % 32 == 0) any_fits_32 = true;
  }
  std::vector<QuantType> out;
  if (!all_float) return out;
  for (const auto& t : QuantTypes()) {
    if (t.needs_imatrix && !have_imatrix) continue;
    // Rows that are not whole 32-blocks end up F16 under every block type:
    // when that holds for every matrix, no block type means anything.
    if (t.block > 1 && !any_fits_32) continue;
    out.push_back(t);
  }
  return out;
}

Result<QuantizeResult> DescribeQuantized(const std::string& path, const QuantType& type) {
  auto g = ReadGguf(path);
  if (!g) return g.error();
  QuantizeResult r;
  r.file_bytes = g->file_bytes;
  r.bits_per_weight = g->bits_per_weight();
  r.type_histogram = g->type_histogram;
  if (type.block > 1) {
    for (const auto& t : g->tensors) {
      if (t.shape.size() < 2 || t.type == "f32") continue;
      if (t.shape[0] % type.block != 0) r.fallbacks.push_back({t.name, t.shape[0], t.type});
    }
  }
  return r;
}

Result<QuantizeResult> Quantize(const QuantizeRequest& req, const std::function<void(double)>& on_progress) {
  EnsureBackend();
  auto src = ReadGguf(req.src);
  if (!src) return src.error();
  auto supported = SupportedQuantTypes(*src, req.imatrix != nullptr);
  bool ok = std::any_of(supported.begin(), supported.end(),
                        [&](const QuantType& t) { return t.name == req.type.name; });
  if (!ok) {
    return MakeError(ErrorCode::kUnsupported,
                     req.src + " cannot be quantized to " + req.type.name +
                         (req.type.needs_imatrix && !req.imatrix ? " without --imatrix" : "") +
                         "; it can take: " + JoinNames(supported));
  }
  std::vector<llama_model_imatrix_data> idata;
  if (req.imatrix) {
    for (const auto& [name, v] : *req.imatrix) idata.push_back({name.c_str(), v.data(), v.size()});
    idata.push_back({nullptr, nullptr, 0});  // the list ends with a null name
  }
  llama_model_quantize_params p = llama_model_quantize_default_params();
  p.nthread =
      req.threads > 0 ? req.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.ftype = static_cast<llama_ftype>(req.type.ftype);
  p.imatrix = req.imatrix ? idata.data() : nullptr;

  // llama_model_quantize has no progress hook: estimate from the output's growth
  // against the size the source would shrink to at the type's nominal rate.
  const double nominal_bpw = req.type.block == 1       ? (req.type.name == "F32" ? 32 : 16)
                             : req.type.name == "Q8_0" ? 8.5
                                                       : 5.0;
  const double expect = std::max(1.0, src->n_params() * nominal_bpw / 8.0);
  std::atomic<bool> done{false};
  std::thread watcher;
  if (on_progress) {
    watcher = std::thread([&] {
      while (!done.load()) {
        std::error_code ec;
        auto sz = std::filesystem::file_size(req.dst, ec);
        if (!ec) on_progress(std::min(0.99, sz / expect));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  auto t0 = std::chrono::steady_clock::now();
  TakeRecentLlamaErrors();
  uint32_t rc = llama_model_quantize(req.src.c_str(), req.dst.c_str(), &p);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  if (watcher.joinable()) watcher.join();
  if (rc != 0) {
    std::error_code ec;
    std::filesystem::remove(req.dst, ec);  // never leave a half-written model behind
    std::string why = TakeRecentLlamaErrors();
    return MakeError(ErrorCode::kInternal, "llama.cpp could not quantize " + req.src + " to " +
                                               req.type.name + (why.empty() ? "" : ": " + why));
  }
  if (on_progress) on_progress(1.0);
  auto r = DescribeQuantized(req.dst, req.type);
  if (r) r->seconds = seconds;
  return r;
}

}  // namespace hone::engine
