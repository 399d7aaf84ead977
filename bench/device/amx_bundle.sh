#!/usr/bin/env bash
# Packs what bench/device/amx_check.sh needs to check issue 8 (the AMX path)
# on a borrowed Xeon with AMX that has no compiler, packages or network:
# hone and three test binaries built against llama.cpp for Sapphire Rapids,
# the peers, every shared library outside glibc/libstdc++, the tiny trained
# models, and the AMX-refusing shim, in one .tar.xz (binaries compress 3-4x,
# and a borrowed machine takes 64 MiB at most).
# First, here (2 cores: about 40 + 20 minutes):
#   HONE_LLAMA_MARCH=sapphirerapids bash scripts/build-llama.sh
#   HONE_LLAMA_PREFIX=<that prefix> HONE_LLAMA_SOURCE_DIR=<its ../src> BUILD_DIR=build-spr \
#     cmake ... && cmake --build build-spr --target hone isa_tests cli_tests quant_tests
# Usage: bench/device/amx_bundle.sh [BUILD_DIR] [OUT_FILE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build-spr}; OUT_FILE=${2:-$ROOT/.device/amx-bundle.tar.xz}
cd "$ROOT"
PREFIX=$(HONE_LLAMA_MARCH=sapphirerapids bash scripts/build-llama.sh | tail -n 1)
STAGE=$(mktemp -d); trap 'rm -rf "$STAGE"' EXIT
B=$STAGE/bundle
bash bench/device/make_bundle.sh "$BUILD" "$PREFIX" "$B" >/dev/null
cp "$PREFIX/bin/llama-perplexity" "$B/bin/"
# Its tool code lives in a library of its own (libllama-perplexity-impl.so).
ldd "$PREFIX/bin/llama-perplexity" | awk '/=> \// {print $3}' | grep "$(dirname "$PREFIX")" | xargs -r cp -L -t "$B/lib/"
mkdir -p "$B/tests" "$B/shared"
for t in isa_tests cli_tests quant_tests; do cp "$BUILD/tests/$t" "$B/tests/"; done
cp -r ../shared/models ../shared/corpora "$B/shared/"
cc -shared -fPIC -O2 -o "$B/amx_refuse.so" bench/amx_refuse.c -ldl
# The tests carry the paths they were built with; amx_check.sh recreates them.
printf 'root=%s\nprefix=%s\nbuild=%s\n' "$ROOT" "$PREFIX" "$BUILD" >"$B/paths.txt"
mkdir -p "$(dirname "$OUT_FILE")"
tar -C "$STAGE" -cJf "$OUT_FILE" bundle
du -h "$OUT_FILE"
