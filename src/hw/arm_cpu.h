// What this ARM CPU can do, asked of the kernel rather than read from
// /proc/cpuinfo: the auxiliary vector's HWCAP bits are what the kernel lets a
// process use, and /proc/cpuinfo can belong to someone else. Under user-mode
// emulation (qemu-aarch64 7.x, as the arm64 smoke suite runs) it is the x86
// host's file, which would report AVX-512 for an ARM program.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hone::hw {

struct LiveArmCpu {
  std::vector<std::string> isa;  // hone names, in the order of ParseCpuInfo's
  std::string model;             // from MIDR_EL1 when the kernel exposes it; else empty
};

// The running CPU's features on an aarch64 build; nullopt on any other.
std::optional<LiveArmCpu> ReadLiveArmCpu();

}  // namespace hone::hw
