#!/usr/bin/env bash
# Configures and builds hone against the cached llama.cpp prefix.
# Usage: scripts/build-hone.sh   (BUILD_DIR, BUILD_TYPE, JOBS may be set)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$(bash scripts/build-llama.sh | tail -n 1)
SRC_DIR=$(cd "$PREFIX/../src" && pwd)
BUILD_DIR=${BUILD_DIR:-build}
GEN=(); [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null && GEN=(-G Ninja)
LAUNCH=(); command -v ccache >/dev/null && LAUNCH=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "${LAUNCH[@]}" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DHONE_LLAMA_SOURCE_DIR="$SRC_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
echo "[hone] built $BUILD_DIR/hone" >&2
