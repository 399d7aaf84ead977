#!/usr/bin/env bash
# Configures and builds hone against the cached llama.cpp prefix.
# Usage: scripts/build-hone.sh   (BUILD_DIR, BUILD_TYPE, JOBS may be set)
set -euo pipefail
cd "$(dirname "$0")/.."
# HONE_LLAMA_PREFIX: use an llama.cpp you installed yourself (its lib/cmake/llama
# must exist); otherwise the pinned build, made once and cached.
if [ -n "${HONE_LLAMA_PREFIX:-}" ]; then
  PREFIX=$HONE_LLAMA_PREFIX
  SRC_DIR=${HONE_LLAMA_SOURCE_DIR:-}
else
  PREFIX=$(bash scripts/build-llama.sh | tail -n 1)
  SRC_DIR=$(cd "$PREFIX/../src" && pwd)
fi
BUILD_DIR=${BUILD_DIR:-build}
# ccache keys on paths below the checkout relative to it, so a fresh clone in
# another folder (CI's) reuses what this machine already compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
GEN=(); [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null && GEN=(-G Ninja)
LAUNCH=(); command -v ccache >/dev/null && LAUNCH=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "${LAUNCH[@]}" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DHONE_LLAMA_SOURCE_DIR="$SRC_DIR" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
echo "[hone] built $BUILD_DIR/hone" >&2
