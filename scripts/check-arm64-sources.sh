#!/usr/bin/env bash
# Compiles every hone source for aarch64 with Debian's cross compiler
# (g++-aarch64-linux-gnu), syntax and types only: no x86-only header,
# intrinsic or instruction may sit outside an #if. A first step of issue 29;
# the full cross build and the qemu smoke suite are not here yet.
# Usage: scripts/check-arm64-sources.sh [file.cc ...]   (default: src/**/*.cc)
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX_ARM64:-aarch64-linux-gnu-g++}
command -v "$CXX" >/dev/null || { echo "[arm64] $CXX not found: apt-get install g++-aarch64-linux-gnu" >&2; exit 2; }
PREFIX=$(bash scripts/build-llama.sh | tail -n 1)
SRC=$(cd "$PREFIX/../src" && pwd)
# The paths CMake defines, as a header (quotes survive no shell that way).
DEFINES=$(mktemp --suffix=.h); LOG=$(mktemp); trap 'rm -f "$DEFINES" "$LOG"' EXIT
for d in HONE_LLAMA_SOURCE_DIR HONE_SOURCE_DIR HONE_BINARY HONE_TEST_TMP HONE_SHARED_DIR HONE_PEER_BIN_DIR; do
  echo "#define $d \"\"" >>"$DEFINES"
done
# The architecture-independent headers (nlohmann, CLI11, toml++, curl,
# sqlite, libpq, hwloc, gtest) come from the host's /usr/include, searched
# after the cross compiler's own system folders.
FLAGS=(-std=c++20 -fsyntax-only -Wall -Isrc -Itests -I"$PREFIX/include" -I"$SRC/common" -I"$SRC/vendor/cpp-httplib"
  -I"$SRC/ggml/include" -idirafter /usr/include/aarch64-linux-gnu -idirafter /usr/include -idirafter /usr/include/postgresql
  -include "$DEFINES")
# hwloc's generated config.h lives in the multiarch folder: arm64's when
# libhwloc-dev:arm64 is installed (dpkg --add-architecture arm64), else the
# host's (the same sizes on both 64-bit targets; syntax only).
[ -f /usr/include/aarch64-linux-gnu/hwloc/autogen/config.h ] || FLAGS+=(-idirafter /usr/include/x86_64-linux-gnu)
if [ $# -gt 0 ]; then FILES=("$@"); else mapfile -t FILES < <(find src -name '*.cc' ! -name '*_test.cc' | sort); fi
printf '%s\n' "${FILES[@]}" | xargs -P "${JOBS:-2}" -I{} sh -c "$CXX ${FLAGS[*]} {} 2>&1 | sed 's|^|{}: |' | grep -E 'error' | head -3" \
  | tee "$LOG"
if [ -s "$LOG" ]; then echo "[arm64] errors above" >&2; exit 1; fi
echo "[arm64] ${#FILES[@]} files compile for aarch64"
