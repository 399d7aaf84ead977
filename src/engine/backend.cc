#include "engine/backend.h"

#include <llama.h>
#include <log.h>  // llama.cpp common/: its drafters log through it

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

namespace hone::engine {
namespace {

std::atomic<bool> g_verbose{false};
thread_local std::deque<std::string> t_recent;  // last few warn/error lines
thread_local std::string t_partial;             // llama logs lines in pieces

void LogCallback(ggml_log_level level, const char* text, void*) {
  if (g_verbose) std::fputs(text, stderr);
  if (level == GGML_LOG_LEVEL_CONT) {
    t_partial += text;
  } else if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
    t_partial = text;
  } else {
    t_partial.clear();
    return;
  }
  if (!t_partial.empty() && t_partial.back() == '\n') {
    t_partial.pop_back();
    t_recent.push_back(t_partial);
    t_partial.clear();
    if (t_recent.size() > 8) t_recent.pop_front();
  }
}

}  // namespace

void EnsureBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* v = std::getenv("HONE_VERBOSE"); v && *v && *v != '0') g_verbose = true;
    llama_log_set(LogCallback, nullptr);
    // common/'s drafters print info lines on every request ("shrink cleanup
    // begin"); only their warnings and errors reach stderr unless verbose.
    common_log_set_verbosity_thold(g_verbose ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN);
    llama_backend_init();
  });
}

void SetVerbose(bool verbose) {
  g_verbose = verbose;
  common_log_set_verbosity_thold(verbose ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN);
}

std::string TakeRecentLlamaErrors() {
  std::string out;
  for (auto& line : t_recent) {
    if (!out.empty()) out += "; ";
    out += line;
  }
  t_recent.clear();
  return out;
}

std::string SystemInfo() {
  EnsureBackend();
  return llama_print_system_info();
}

bool UsesOpenMp() { return SystemInfo().find("OPENMP = 1") != std::string::npos; }

namespace {

// The compiler's ISA macros as scripts/build-llama.sh lists them, and what this
// CPU must support for code built with each. Macros without a runtime check
// here (SSE*, XSAVE*, ...) are implied by the ones listed on every x86-64 CPU
// that has them.
struct IsaCheck {
  const char* macro;
  bool (*supported)();
};
#define HONE_ISA(macro, name)                               \
  {                                                         \
    macro, [] { return __builtin_cpu_supports(name) != 0; } \
  }
#if defined(__x86_64__)
// CPUID bits, for the features older compilers' __builtin_cpu_supports
// cannot name (clang 14 knows neither F16C, AVX512-FP16, AVX-VNNI nor AMX).
bool Cpuid(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
enum { kEax = 0, kEcx = 2, kEdx = 3 };
#define HONE_ISA_CPUID(macro, leaf, subleaf, reg, bit)   \
  {                                                      \
    macro, [] { return Cpuid(leaf, subleaf, reg, bit); } \
  }
#elif defined(__aarch64__) && defined(__linux__)
// The kernel's HWCAP bits: what it lets this process execute (a build for
// armv8.2-a+dotprod dies of SIGILL on a Cortex-A53 or A72 without them).
#define HONE_ISA_HWCAP(macro, word, bit)                 \
  {                                                      \
    macro, [] { return (getauxval(word) & (bit)) != 0; } \
  }
#endif
const IsaCheck kIsaChecks[] = {
#if defined(__x86_64__)
    HONE_ISA("__AVX__", "avx"),
    HONE_ISA("__AVX2__", "avx2"),
    HONE_ISA("__FMA__", "fma"),
    HONE_ISA_CPUID("__F16C__", 1, 0, kEcx, 29),
    HONE_ISA("__BMI2__", "bmi2"),
    HONE_ISA("__AVX512F__", "avx512f"),
    HONE_ISA("__AVX512BW__", "avx512bw"),
    HONE_ISA("__AVX512VL__", "avx512vl"),
    HONE_ISA("__AVX512DQ__", "avx512dq"),
    HONE_ISA("__AVX512VNNI__", "avx512vnni"),
    HONE_ISA("__AVX512BF16__", "avx512bf16"),
    HONE_ISA("__AVX512VBMI__", "avx512vbmi"),
    HONE_ISA_CPUID("__AVX512FP16__", 7, 0, kEdx, 23),
    HONE_ISA_CPUID("__AVXVNNI__", 7, 1, kEax, 4),
    HONE_ISA_CPUID("__AMX_BF16__", 7, 0, kEdx, 22),
    HONE_ISA_CPUID("__AMX_TILE__", 7, 0, kEdx, 24),
    HONE_ISA_CPUID("__AMX_INT8__", 7, 0, kEdx, 25),
#elif defined(__aarch64__) && defined(__linux__)
    HONE_ISA_HWCAP("__ARM_NEON", AT_HWCAP, HWCAP_ASIMD),
    HONE_ISA_HWCAP("__ARM_FEATURE_FP16_VECTOR_ARITHMETIC", AT_HWCAP, HWCAP_ASIMDHP),
    HONE_ISA_HWCAP("__ARM_FEATURE_DOTPROD", AT_HWCAP, HWCAP_ASIMDDP),
    HONE_ISA_HWCAP("__ARM_FEATURE_SVE", AT_HWCAP, HWCAP_SVE),
    HONE_ISA_HWCAP("__ARM_FEATURE_SVE2", AT_HWCAP2, HWCAP2_SVE2),
    HONE_ISA_HWCAP("__ARM_FEATURE_MATMUL_INT8", AT_HWCAP2, HWCAP2_I8MM),
    HONE_ISA_HWCAP("__ARM_FEATURE_BF16", AT_HWCAP2, HWCAP2_BF16),
#endif
};
#undef HONE_ISA
#undef HONE_ISA_CPUID
#undef HONE_ISA_HWCAP

}  // namespace

std::string LlamaBuildKey() {
#ifdef HONE_LLAMA_BUILD_KEY
  return HONE_LLAMA_BUILD_KEY;
#else
  return "";
#endif
}

std::string LlamaBuildIsa() {
#ifdef HONE_LLAMA_ISA
  return HONE_LLAMA_ISA;
#else
  return "";
#endif
}

namespace {

// A compiler macro as `hone info` names the feature: __AVX512F__ -> AVX512F,
// __ARM_FEATURE_DOTPROD -> DOTPROD, __ARM_FEATURE_MATMUL_INT8 -> I8MM.
std::string IsaDisplayName(std::string macro) {
  if (macro.starts_with("__")) macro.erase(0, 2);
  if (macro.ends_with("__")) macro.erase(macro.size() - 2);
  if (macro == "ARM_NEON") return "NEON";
  if (macro == "ARM_FEATURE_FP16_VECTOR_ARITHMETIC") return "FP16";
  if (macro == "ARM_FEATURE_MATMUL_INT8") return "I8MM";
  if (macro.starts_with("ARM_FEATURE_")) macro.erase(0, 12);
  return macro;
}

}  // namespace

Status CheckCpuRunsThisBuild() {
  const std::string isa = " " + LlamaBuildIsa() + " ";
  std::string missing;
  for (const IsaCheck& c : kIsaChecks) {
    if (isa.find(std::string(" ") + c.macro + " ") != std::string::npos && !c.supported())
      missing += (missing.empty() ? "" : " ") + IsaDisplayName(c.macro);
  }
  if (missing.empty()) return Status::Ok();
  return MakeError(ErrorCode::kUnsupported,
                   "the llama.cpp this hone links (" + LlamaBuildKey() +
                       ") was built for instructions this CPU lacks: " + missing +
                       ". Rebuild on this machine (scripts/build-hone.sh builds a native llama.cpp for it), "
                       "or build a portable one with HONE_LLAMA_PORTABLE=1");
}

std::string LlamaVersion() {
#ifdef HONE_LLAMA_COMMIT
  return HONE_LLAMA_COMMIT;
#else
  return "unknown";
#endif
}

}  // namespace hone::engine
