// Intel AMX (the tile matrix unit of Sapphire Rapids and later Xeons): whether
// ggml's AMX kernels take the weights of the models loaded from now on, and if
// not, why. On every other CPU this reports "no AMX" and changes nothing.
//
// Why there is a self-test: at the pinned llama.cpp commit, GCC compiled the
// AMX tile configuration away and the first prompt batch died with SIGILL
// (scripts/patches/0001-*). hone now carries that fix, but a CPU feature that a
// hypervisor advertises yet mishandles, or a llama.cpp built elsewhere
// (HONE_LLAMA_PREFIX) without the fix, must cost speed, never the process. So
// once per process, before AMX is used, a forked child multiplies Q4_0, Q8_0
// and Q4_K matrices through ggml's AMX buffer type and compares them with the
// plain CPU path; if the child crashes, hangs or disagrees, AMX stays off.
#pragma once

#include <mutex>
#include <string>

namespace hone::engine {

struct AmxStatus {
  bool cpu = false;                   // CPUID: AMX-TILE and AMX-INT8
  bool built = false;                 // ggml's CPU backend has AMX kernels (a native build on an AMX CPU)
  bool granted = false;               // Linux gave the process the tile-data state (arch_prctl)
  bool switchable = false;            // hone's ggml patch: AMX can be left out of a model load
  bool disabled_by_user = false;      // HONE_AMX=off
  std::string self_test = "not run";  // "passed", or what went wrong
  bool usable = false;                // all of the above say yes: loads may use AMX
  std::string reason;                 // one line for `hone info`: in use, or why not
};

// Probed once per process (thread-safe); runs the self-test when AMX could be used.
const AmxStatus& Amx();

// For Model::Load: the AMX choice for one load. While it lives no other load
// can change the choice (ggml's switch is process-wide and read during the
// load); on machines where AMX is not offered it locks nothing.
class AmxLoadChoice {
 public:
  explicit AmxLoadChoice(bool want);
  bool amx_on() const { return amx_on_; }
  // False when AMX must stay off but this llama.cpp cannot leave it out of a
  // load (no hone patch): the load must turn off every extra buffer type.
  bool keep_repack() const { return keep_repack_; }

 private:
  std::unique_lock<std::mutex> lock_;
  bool amx_on_ = false;
  bool keep_repack_ = true;
};

}  // namespace hone::engine
