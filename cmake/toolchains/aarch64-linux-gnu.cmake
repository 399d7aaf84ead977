# Cross-compiling for 64-bit ARM Linux from an x86-64 Debian machine, with
# Debian's cross toolchain (g++-aarch64-linux-gnu) and arm64 multiarch -dev
# packages (libhwloc-dev:arm64, ...), which install beside the host's own under
# /usr/lib/aarch64-linux-gnu. scripts/arm64.sh sets all of this up.
#
# The sysroot is the host's own root: multiarch keeps each architecture's
# libraries apart, and header-only packages (CLI11, nlohmann-json) are shared.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and CMake packages only from the arm64 folders (never the host's
# x86-64 ones); programs (esbuild, node, python) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu
    /usr/lib/x86_64-linux-gnu/cmake /usr/lib/x86_64-linux-gnu/pkgconfig)
# pkg-config (hwloc) must read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# Test programs run under user-mode emulation (CTest, try_run, gtest discovery).
find_program(HONE_QEMU_AARCH64 qemu-aarch64-static qemu-aarch64)
if(HONE_QEMU_AARCH64)
  # The cross toolchain's loader must find its own libc (see tests/arm64/smoke.py).
  set(CMAKE_CROSSCOMPILING_EMULATOR ${HONE_QEMU_AARCH64} -L /usr/aarch64-linux-gnu
      -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
endif()
