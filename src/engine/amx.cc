#include "engine/amx.h"

#if defined(__x86_64__)
#include <cpuid.h>  // x86 only: elsewhere there is no AMX to ask about
#endif
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "util/isolated.h"

namespace hone::engine {
namespace {

bool CpuHasAmx() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  return tile && int8;
#else
  return false;
#endif
}

ggml_backend_dev_t CpuDevice() { return ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0); }

// The AMX buffer type among those the CPU device offers to model loads.
ggml_backend_buffer_type_t AmxBufferType() {
  auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), "ggml_backend_dev_get_extra_bufts"));
  if (!get) return nullptr;
  for (ggml_backend_buffer_type_t* b = get(CpuDevice()); b && *b; ++b) {
    if (std::strcmp(ggml_backend_buft_name(*b), "AMX") == 0) return *b;
  }
  return nullptr;
}

using SetAmxEnabledFn = void (*)(bool);
SetAmxEnabledFn AmxSwitch() {
  return reinterpret_cast<SetAmxEnabledFn>(
      ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), "ggml_backend_cpu_set_amx_enabled"));
}

// In the child: y = W x through the AMX buffer and through plain memory, for
// each weight type ggml has AMX kernels for that models commonly use. M = 64
// prompt rows takes the tile path (M = 1, decode, takes AVX512-VNNI instead).
// One thread: the child must not start OpenMP threads (see util/isolated.h).
int AmxKernelCheck(ggml_backend_buffer_type_t amx, std::string* message) {
  constexpr int K = 256, N = 64, M = 64;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> w(size_t(K) * N), x(size_t(K) * M);
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (ggml_type type : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
    std::vector<uint8_t> q(ggml_row_size(type, K) * N);
    ggml_quantize_chunk(type, w.data(), q.data(), 0, N, K, nullptr);

    ggml_init_params wp{ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context* wctx = ggml_init(wp);
    ggml_tensor* wa = ggml_new_tensor_2d(wctx, type, K, N);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, amx);
    if (!buf) {
      *message = "could not allocate an AMX buffer";
      return 2;
    }
    ggml_backend_tensor_set(wa, q.data(), 0, q.size());  // repacks into the AMX layout

    ggml_init_params cp{16u << 20, nullptr, false};
    ggml_context* ctx = ggml_init(cp);
    ggml_tensor* wc = ggml_new_tensor_2d(ctx, type, K, N);
    std::memcpy(wc->data, q.data(), q.size());
    ggml_tensor* xt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    std::memcpy(xt->data, x.data(), x.size() * sizeof(float));
    ggml_tensor* ya = ggml_mul_mat(ctx, wa, xt);
    ggml_tensor* yc = ggml_mul_mat(ctx, wc, xt);
    ggml_cgraph* gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ya);
    ggml_build_forward_expand(gf, yc);
    if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) {
      *message = std::string("graph compute failed for ") + ggml_type_name(type);
      return 2;
    }
    const float* a = static_cast<const float*>(ya->data);
    const float* c = static_cast<const float*>(yc->data);
    double max_ref = 0, max_err = 0;
    for (int i = 0; i < N * M; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(c[i])));
      max_err = std::max(max_err, std::fabs(double(a[i]) - c[i]));
    }
    ggml_free(ctx);
    ggml_backend_buffer_free(buf);
    ggml_free(wctx);
    if (!(max_err <= 0.02 * max_ref)) {
      *message = std::string("AMX result differs from the CPU path for ") + ggml_type_name(type) +
                 " (max error " + std::to_string(max_err) + " of " + std::to_string(max_ref) + ")";
      return 1;
    }
  }
  return 0;
}

AmxStatus Probe() {
  EnsureBackend();
  AmxStatus s;
  s.cpu = CpuHasAmx();
  s.built = ggml_cpu_has_amx_int8() != 0;
  ggml_backend_buffer_type_t amx = s.built ? AmxBufferType() : nullptr;
  s.granted = amx != nullptr;
  s.switchable = AmxSwitch() != nullptr;
  if (const char* v = std::getenv("HONE_AMX")) {
    s.disabled_by_user = std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0;
  }
  if (!s.cpu) {
#if defined(__x86_64__)
    s.reason = "not in use: this CPU has no AMX";
#else
    s.reason = "not applicable: AMX is an x86 (Intel Xeon) feature";
#endif
  } else if (!s.built) {
    s.reason =
        "not in use: llama.cpp was built without AMX kernels (a portable build, or a compiler without "
        "-mamx-int8)";
  } else if (!s.granted) {
    s.reason = "not in use: the kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
  } else if (s.disabled_by_user) {
    s.reason = "off: HONE_AMX=off";
  } else {
    ChildOutcome child = RunForked([amx](std::string* msg) { return AmxKernelCheck(amx, msg); }, 30);
    if (child.ok()) {
      s.self_test = "passed";
      s.usable = true;
      s.reason =
          "in use: ggml's AMX kernels for Q4_0/Q4_1/Q8_0/Q4_K/Q5_K/Q6_K/IQ4_XS weights (self-test passed)";
    } else {
      s.self_test = "failed: " + child.Describe() + (child.output.empty() ? "" : ": " + child.output);
      s.reason = "off: the AMX self-test " + s.self_test + "; using the AVX-512/AVX2 kernels";
      std::fprintf(stderr, "[hone] AMX %s\n", s.reason.c_str());
    }
  }
  return s;
}

std::mutex g_switch_mu;  // held from setting ggml's AMX switch until the load that reads it is done

}  // namespace

const AmxStatus& Amx() {
  static const AmxStatus status = Probe();
  return status;
}

AmxLoadChoice::AmxLoadChoice(bool want) {
  const AmxStatus& s = Amx();
  if (!s.built || !s.granted) return;  // AMX is not offered to loads at all
  amx_on_ = want && s.usable;
  if (SetAmxEnabledFn set = AmxSwitch()) {
    lock_ = std::unique_lock<std::mutex>(g_switch_mu);
    set(amx_on_);
  } else if (!amx_on_) {
    keep_repack_ = false;  // offered, and cannot be left out: only no extra buffer types avoids it
  } else {
    amx_on_ = true;
  }
}

}  // namespace hone::engine
