#!/usr/bin/env bash
# Packs hone, the peer tools and every shared library they need into one
# relocatable folder, so the benchmarks can run on another (bigger) x86-64
# machine that has no compilers or packages. Build against the portable
# llama.cpp first, so no instruction the other CPU lacks sneaks in:
#   HONE_LLAMA_PORTABLE=1 bash scripts/build-llama.sh
#   HONE_LLAMA_PREFIX=<prefix-portable> BUILD_DIR=build-portable bash scripts/build-hone.sh
# Usage: bench/device/make_bundle.sh BUILD_DIR PORTABLE_PREFIX OUT_DIR
set -euo pipefail
BUILD_DIR=$1 PREFIX=$2 OUT=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$OUT"; mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/bench"
cp "$BUILD_DIR/hone" "$OUT/bin/"
for t in llama-bench llama-quantize llama-server; do
  # llama-server is left out of a build made with HONE_LLAMA_PEERS that omits it.
  if [ -x "$PREFIX/bin/$t" ]; then cp "$PREFIX/bin/$t" "$OUT/bin/"; elif [ "$t" != llama-server ]; then exit 1; fi
done
# Shared libraries outside glibc/libstdc++ (which the target has, newer).
for exe in "$OUT"/bin/*; do
  ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$OUT/lib/" ;;
    esac
  done
done
cp "$PREFIX/../src/models/ggml-vocab-qwen2.gguf" "$OUT/"
cp "$ROOT/bench/tg_vs_llama_bench.py" "$ROOT/bench/serve_vs_llama_server.py" "$ROOT/bench/device/run.sh" \
  "$ROOT/bench/device/serve_only.sh" "$OUT/bench/"
du -sh "$OUT"
