#!/usr/bin/env bash
# Fetches llama.cpp at the pinned commit (from the npm package node-llama-cpp,
# which ships the tree as a git bundle), verifies it, and builds libllama + ggml
# and the peer tools into a cache prefix outside the checkout:
#
#   ${HONE_CACHE:-~/.cache/hone}/llama.cpp/<commit>/{src,build-<key>,prefix-<key>}
#
# <key> names the ISA the build is for (see below); scripts/patches/*.patch are
# applied to the source first.
#
# A second run (or a fresh clone on the same machine) finds the stamp file and
# returns at once. Prints the prefix on the last line of stdout.
set -euo pipefail

LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
NPM_PKG=node-llama-cpp@3.21.1
NPM_INTEGRITY='sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=='

CACHE=${HONE_CACHE:-$HOME/.cache/hone}
PATCH_DIR=$(cd "$(dirname "$0")" && pwd)/patches
PATCHES=("$PATCH_DIR"/*.patch)
PATCH_HASH=$(cat "${PATCHES[@]}" | sha256sum | cut -c1-8)

# The cache key names what the build is for, not just the commit: a native
# build carries this CPU's ISA (AVX-512, AMX, ...), and a home folder shared
# between machines, or an image built on one host and run on another, must
# never reuse it on a CPU that lacks those instructions. The key is
# <kind>-<march>-<hash of the compiler's ISA macros and of the patches>.
# HONE_LLAMA_PORTABLE=1 builds for any x86-64-v3 CPU (AVX2/FMA) instead, for
# binaries that travel to another machine. HONE_LLAMA_MARCH=<gcc -march name>
# (sapphirerapids, znver4, ...) builds for that CPU from any machine: a bundle
# for a bigger box, or an image for a known fleet.
# HONE_LLAMA_CROSS=aarch64 cross-builds for 64-bit ARM Linux with Debian's
# cross toolchain (cmake/toolchains/aarch64-linux-gnu.cmake), for the qemu smoke
# suite (scripts/arm64.sh); -march defaults to armv8.2-a+dotprod+fp16 (Raspberry
# Pi 5, Graviton 2 and later, Ampere Altra) and HONE_LLAMA_MARCH overrides it.
# Only the libraries are built: the peers are x86 benchmark tools.
CC_BIN=${CC:-cc}
TOOLCHAIN=()
PEERS=(${HONE_LLAMA_PEERS:-llama-bench llama-server llama-perplexity llama-quantize llama-imatrix llama-cli})
if [ "${HONE_LLAMA_CROSS:-}" = aarch64 ]; then
  CC_BIN=aarch64-linux-gnu-gcc
  command -v "$CC_BIN" >/dev/null || { echo "[llama.cpp] $CC_BIN not found (apt-get install g++-aarch64-linux-gnu)" >&2; exit 2; }
  MARCH=${HONE_LLAMA_MARCH:-armv8.2-a+dotprod+fp16}; MARCH_FLAG=-march=$MARCH; KIND=cross-aarch64
  TOOLCHAIN=("-DCMAKE_TOOLCHAIN_FILE=$(cd "$(dirname "$0")/.." && pwd)/cmake/toolchains/aarch64-linux-gnu.cmake")
  ISA_FLAGS=(-DGGML_NATIVE=OFF "-DGGML_CPU_ARM_ARCH=$MARCH")
  PEERS=()
elif [ -n "${HONE_LLAMA_MARCH:-}" ]; then
  MARCH=$HONE_LLAMA_MARCH; MARCH_FLAG=-march=$MARCH; KIND=target
  "$CC_BIN" $MARCH_FLAG -E -x c /dev/null >/dev/null 2>&1 || { echo "[llama.cpp] the compiler does not know -march=$MARCH" >&2; exit 2; }
  # ggml reads the ISA from the compiler's macros once GGML_NATIVE is off and
  # -march names the CPU; its own per-feature options stay off. On ARM ggml
  # takes the -march from GGML_CPU_ARM_ARCH (as the cross build does).
  if [ "$(uname -m)" = aarch64 ]; then
    ISA_FLAGS=(-DGGML_NATIVE=OFF "-DGGML_CPU_ARM_ARCH=$MARCH")
  else
    ISA_FLAGS=(-DGGML_NATIVE=OFF "-DCMAKE_C_FLAGS=$MARCH_FLAG" "-DCMAKE_CXX_FLAGS=$MARCH_FLAG")
  fi
elif [ "${HONE_LLAMA_PORTABLE:-0}" = 1 ] && [ "$(uname -m)" = aarch64 ]; then
  # Every 64-bit ARM CPU, the Cortex-A53 and A72 (Raspberry Pi 3 and 4) included.
  MARCH=armv8-a; MARCH_FLAG=-march=armv8-a; KIND=portable
  ISA_FLAGS=(-DGGML_NATIVE=OFF "-DGGML_CPU_ARM_ARCH=$MARCH")
elif [ "${HONE_LLAMA_PORTABLE:-0}" = 1 ]; then
  ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
  MARCH=x86-64-v3; MARCH_FLAG=-march=x86-64-v3; KIND=portable
else
  ISA_FLAGS=(-DGGML_NATIVE=ON)
  # awk reads to the end: an early exit would SIGPIPE the compiler, and with
  # pipefail that fails the script now and then.
  MARCH=$("$CC_BIN" -march=native -Q --help=target 2>/dev/null | awk '$1=="-march=" && m=="" {m=$2} END {print m}')
  MARCH=${MARCH:-native}; MARCH_FLAG=-march=native; KIND=native
fi
ISA_MACROS=$(echo | "$CC_BIN" $MARCH_FLAG -dM -E - 2>/dev/null \
  | awk '$2 ~ /^__(SSE|AVX|AMX|FMA|F16C|BMI|VNNI|GFNI|VAES|VPCLMUL|AES|SHA|POPCNT|LZCNT|MOVBE|XSAVE|ARM_NEON$|ARM_FEATURE_(DOTPROD|MATMUL_INT8|SVE|SVE2|FP16_VECTOR_ARITHMETIC|BF16))/ {print $2}' | sort | tr '\n' ' ')
ISA_HASH=$(printf '%s|%s' "$ISA_MACROS" "$PATCH_HASH" | sha256sum | cut -c1-12)
KEY=$KIND-$MARCH-$ISA_HASH
ROOT=$CACHE/llama.cpp/$LLAMA_COMMIT
SRC=$ROOT/src BUILD=$ROOT/build-$KEY PREFIX=$ROOT/prefix-$KEY
STAMP=$PREFIX/.hone-built
JOBS=${JOBS:-$(nproc)}

log() { echo "[llama.cpp] $*" >&2; }

if [ -f "$STAMP" ]; then
  log "cached build found at $PREFIX"
  echo "$PREFIX"; exit 0
fi
mkdir -p "$ROOT"

# 1. Source: npm tarball -> verified -> git bundle -> checkout at the pinned commit.
if [ ! -d "$SRC/.git" ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  log "fetching $NPM_PKG from the npm registry"
  (cd "$tmp" && npm pack --silent "$NPM_PKG" >/dev/null)
  tgz=$(ls "$tmp"/*.tgz)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$NPM_INTEGRITY" ]; then
    log "INTEGRITY MISMATCH for $NPM_PKG"
    log "  expected $NPM_INTEGRITY"
    log "  got      $got"
    exit 1
  fi
  log "tarball integrity verified"
  tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$SRC"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$SRC"
  git -C "$SRC" -c advice.detachedHead=false checkout -q "$LLAMA_COMMIT"
fi
head=$(git -C "$SRC" rev-parse HEAD)
[ "$head" = "$LLAMA_COMMIT" ] || { log "checkout is at $head, expected $LLAMA_COMMIT"; exit 1; }

# 1b. hone's patches to the pinned tree (scripts/patches/*.patch, each one
# upstreamable and described at its top). The tree is reset first, so a changed
# patch set never stacks on an old one; the applied set is recorded.
if [ "$(cat "$SRC/.hone-patches" 2>/dev/null)" != "$PATCH_HASH" ]; then
  git -C "$SRC" checkout -q -f "$LLAMA_COMMIT"
  for p in "${PATCHES[@]}"; do
    git -C "$SRC" apply --whitespace=nowarn "$p" || { log "patch $(basename "$p") does not apply"; exit 1; }
    log "applied $(basename "$p")"
  done
  echo "$PATCH_HASH" >"$SRC/.hone-patches"
fi

# 2. Build: CPU backend tuned to this machine's ISA, shared libs, peer tools.
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
LAUNCH=(); command -v ccache >/dev/null && LAUNCH=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "configuring for $KEY (ISA: ${ISA_MACROS:-unknown}), CPU backend"
cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" "${LAUNCH[@]}" "${TOOLCHAIN[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DCMAKE_INSTALL_RPATH="$PREFIX/lib" -DCMAKE_BUILD_WITH_INSTALL_RPATH=OFF \
  -DBUILD_SHARED_LIBS=ON "${ISA_FLAGS[@]}" -DGGML_OPENMP=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >"$BUILD.configure.log" 2>&1 \
  || { tail -30 "$BUILD.configure.log" >&2; exit 1; }
log "building libllama, ggml and peers (${PEERS[*]:-none}) with $JOBS jobs; log: $BUILD.log"
cmake --build "$BUILD" -j "$JOBS" --target llama ggml llama-common cpp-httplib ${PEERS[@]+"${PEERS[@]}"} >"$BUILD.log" 2>&1 \
  || { tail -40 "$BUILD.log" >&2; exit 1; }

# 3. Install just what we built: libraries, headers, CMake package, peer binaries.
mkdir -p "$PREFIX/bin"
cmake --install "$BUILD/ggml" >"$BUILD.install.log" 2>&1 || { tail -20 "$BUILD.install.log" >&2; exit 1; }
# libllama's install rules live in the top-level project, next to every tool's;
# installing that would demand tools we did not build, so copy its few files.
mkdir -p "$PREFIX/include" "$PREFIX/lib/cmake/llama" "$PREFIX/lib/pkgconfig"
cp -a "$BUILD"/bin/libllama.so* "$PREFIX/lib/"
cp -f "$SRC/include/llama.h" "$SRC/include/llama-cpp.h" "$PREFIX/include/"
cp -f "$BUILD/llama-config.cmake" "$BUILD/llama-config-version.cmake" "$PREFIX/lib/cmake/llama/"
cp -f "$BUILD/llama.pc" "$PREFIX/lib/pkgconfig/" 2>/dev/null || true
# llama.cpp's `common` (chat templates with Jinja, tool-call parsing,
# JSON-schema grammars) and its vendored cpp-httplib; their headers stay in
# $SRC (common/, vendor/), which hone's CMake finds beside the prefix.
cp -a "$BUILD"/bin/libllama-common.so* "$PREFIX/lib/"
cp -f "$BUILD/common/libllama-common-base.a" "$PREFIX/lib/"
# Not in lib/: find_library() there would pick it over Debian's cpp-httplib,
# whose headers hone's server is compiled against today.
mkdir -p "$PREFIX/vendor/lib"
cp -f "$BUILD/vendor/cpp-httplib/libcpp-httplib.a" "$PREFIX/vendor/lib/"
for p in ${PEERS[@]+"${PEERS[@]}"}; do cp -f "$BUILD/bin/$p" "$PREFIX/bin/"; done
printf 'commit=%s\nkey=%s\nmarch=%s\nisa=%s\npatches=%s\n' "$LLAMA_COMMIT" "$KEY" "$MARCH" "$ISA_MACROS" "$PATCH_HASH" >"$PREFIX/hone-build.txt"
touch "$STAMP"
log "installed to $PREFIX"
echo "$PREFIX"
