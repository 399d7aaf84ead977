#include "hw/arm_cpu.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstdint>

#include "hw/sysfs.h"
#endif

namespace hone::hw {

#if defined(__aarch64__) && defined(__linux__)
namespace {

struct HwcapBit {
  bool second_word;  // AT_HWCAP2 rather than AT_HWCAP
  unsigned long bit;
  const char* name;
};
// Same names and order as ParseCpuInfo's table (hw/sysfs.cc), so a live probe
// and a fixture of the same CPU agree.
constexpr HwcapBit kBits[] = {
    {false, HWCAP_ASIMD, "NEON"},      {false, HWCAP_SVE, "SVE"},   {true, HWCAP2_SVE2, "SVE2"},
    {false, HWCAP_ASIMDDP, "DOTPROD"}, {true, HWCAP2_I8MM, "I8MM"}, {false, HWCAP_ASIMDHP, "FP16"},
    {true, HWCAP2_BF16, "BF16"},
#ifdef HWCAP2_SME
    {true, HWCAP2_SME, "SME"},
#endif
};

}  // namespace

std::optional<LiveArmCpu> ReadLiveArmCpu() {
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  LiveArmCpu cpu;
  for (const HwcapBit& b : kBits) {
    if (((b.second_word ? hwcap2 : hwcap) & b.bit) != 0) cpu.isa.push_back(b.name);
  }
  // With HWCAP_CPUID the kernel emulates reads of the ID registers from user
  // space; without it an MRS of MIDR_EL1 would be SIGILL.
  if (hwcap & HWCAP_CPUID) {
    uint64_t midr = 0;
    asm volatile("mrs %0, MIDR_EL1" : "=r"(midr));
    const int implementer = static_cast<int>((midr >> 24) & 0xff);
    const int part = static_cast<int>((midr >> 4) & 0xfff);
    if (implementer != 0) cpu.model = ArmModel(implementer, {part});
  }
  return cpu;
}

#else

std::optional<LiveArmCpu> ReadLiveArmCpu() { return std::nullopt; }

#endif

}  // namespace hone::hw
