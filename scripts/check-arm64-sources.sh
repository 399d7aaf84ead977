#!/usr/bin/env bash
# Compiles every hone source for aarch64 with Debian's cross compiler
# (g++-aarch64-linux-gnu), syntax and types only: no x86-only header or
# intrinsic may sit outside an #if (inline assembly it cannot see). A first
# step of issue 29, over src/ without the tests;
# the full cross build and the qemu smoke suite are not here yet.
# Usage: scripts/check-arm64-sources.sh [file.cc ...]   (default: src/**/*.cc)
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX_ARM64:-aarch64-linux-gnu-g++}
command -v "$CXX" >/dev/null || { echo "[arm64] $CXX not found: apt-get install g++-aarch64-linux-gnu" >&2; exit 2; }
# The prefix CMake configured with (the test passes it), else the cached build.
PREFIX=${HONE_LLAMA_PREFIX:-$(bash scripts/build-llama.sh | tail -n 1)}
SRC=$(cd "$PREFIX/../src" && pwd)
# The compiler's arguments in a response file (@file): no shell re-reads them.
ARGS=$(mktemp); DEFINES=$(mktemp --suffix=.h); trap 'rm -f "$ARGS" "$DEFINES"' EXIT
# The paths CMake defines, as a header.
for d in HONE_LLAMA_SOURCE_DIR HONE_SOURCE_DIR HONE_BINARY HONE_TEST_TMP HONE_SHARED_DIR HONE_PEER_BIN_DIR; do
  echo "#define $d \"\"" >>"$DEFINES"
done
# The architecture-independent headers (nlohmann, CLI11, toml++, sqlite,
# libpq, gtest) come from the host's /usr/include, searched after the cross
# compiler's own system folders; hwloc's and curl's generated headers from
# the multiarch folders, arm64's first when its -dev packages are installed,
# else the host's (the same sizes on both 64-bit targets; syntax only).
printf '%s\n' -std=c++20 -fsyntax-only -Wall -Isrc -Itests "-I$PREFIX/include" "-I$SRC/common" \
  "-I$SRC/vendor/cpp-httplib" "-I$SRC/ggml/include" -idirafter /usr/include/aarch64-linux-gnu \
  -idirafter /usr/include -idirafter /usr/include/postgresql -idirafter /usr/include/x86_64-linux-gnu \
  -include "$DEFINES" >"$ARGS"
if [ $# -gt 0 ]; then FILES=("$@"); else mapfile -t FILES < <(find src -name '*.cc' ! -name '*_test.cc' | sort); fi
# Each file's compiler exit status decides (xargs exits 123 if any failed);
# a failing file's first lines of output say why.
if ! printf '%s\n' "${FILES[@]}" | xargs -P "${JOBS:-2}" -I{} sh -c \
    'out=$("$0" @"$1" "$2" 2>&1) || { printf "%s\n" "$out" | head -5 | sed "s|^|$2: |"; exit 1; }' "$CXX" "$ARGS" {}; then
  echo "[arm64] errors above" >&2
  exit 1
fi
echo "[arm64] ${#FILES[@]} files compile for aarch64"
