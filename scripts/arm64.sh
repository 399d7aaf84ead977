#!/usr/bin/env bash
# hone for 64-bit ARM from this x86-64 machine: a cross build and a smoke suite
# that runs it under user-mode emulation (qemu-aarch64-static; no binfmt
# registration needed).
#
#   scripts/arm64.sh            build (cached) and run the whole smoke suite
#   scripts/arm64.sh build      Debian's cross toolchain + arm64 multiarch -dev
#                               packages, llama.cpp for arm64 (cached outside the
#                               checkout like the native one), hone in build-arm64/
#   scripts/arm64.sh smoke [STEP...]   run tests/arm64/smoke.py (all steps, or some)
#
# ./test.sh runs `build` before CTest, and CTest runs each smoke step as a test
# (arm64_smoke.*). On an arm64 machine none of this is needed: ./setup.sh and
# ./test.sh build and test natively. Speeds under emulation mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ARM64_BUILD_DIR:-build-arm64}
SYSROOT=/usr/aarch64-linux-gnu   # the cross toolchain's libc, libstdc++, libgomp
log() { echo "[arm64] $*" >&2; }

if [ "$(uname -m)" = aarch64 ]; then
  log "this machine is arm64: ./setup.sh and ./test.sh build and test hone natively"
  exit 0
fi

install_deps() {
  # Runtime and -dev packages for arm64 beside the host's (multiarch). libpq-dev
  # is not co-installable across architectures on Debian 12 (installing the
  # arm64 one removes the host's), so only its runtime is taken: its headers are
  # the host's, the same on every 64-bit Linux, and CMake is given the library.
  local pkgs=(g++-aarch64-linux-gnu qemu-user-static libc6:arm64 libstdc++6:arm64
    libhwloc-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 libsqlite3-dev:arm64
    libpq5:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libtomlplusplus-dev:arm64)
  local missing=() SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "adding the arm64 architecture to dpkg (multiarch)"
    $SUDO dpkg --add-architecture arm64
  fi
  log "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Belt and braces: if anything did take the host's libpq-dev away, put it back.
  dpkg-query -W -f='${Status}' libpq-dev:amd64 2>/dev/null | grep -q "install ok installed" \
    || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libpq-dev:amd64
}

build() {
  install_deps
  local prefix src
  prefix=$(HONE_LLAMA_CROSS=aarch64 bash scripts/build-llama.sh | tail -n 1)
  src=$(cd "$prefix/../src" && pwd)
  local gen=() launch=()
  [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
  command -v ccache >/dev/null && launch=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  log "configuring hone for arm64 in $BUILD_DIR (llama.cpp: $prefix)"
  # CCACHE_BASEDIR: a fresh clone in another folder still hits the cache.
  CCACHE_BASEDIR=$PWD cmake -S . -B "$BUILD_DIR" "${gen[@]}" "${launch[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DHONE_LLAMA_SOURCE_DIR="$src" \
    -DPostgreSQL_INCLUDE_DIR=/usr/include/postgresql \
    -DPostgreSQL_LIBRARY=/usr/lib/aarch64-linux-gnu/libpq.so.5 >"$BUILD_DIR.configure.log" 2>&1 \
    || { tail -30 "$BUILD_DIR.configure.log" >&2; exit 1; }
  log "building hone, engine_tests and hw_tests for arm64 (${JOBS:-$(nproc)} jobs)"
  CCACHE_BASEDIR=$PWD cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target hone engine_tests hw_tests
  readelf -h "$BUILD_DIR/hone" | grep -q AArch64 || { log "$BUILD_DIR/hone is not an arm64 program"; exit 1; }
  log "built $BUILD_DIR/hone (arm64)"
}

smoke() {
  [ -x "$BUILD_DIR/hone" ] || { log "no $BUILD_DIR/hone: run scripts/arm64.sh build first"; exit 1; }
  python3 tests/arm64/smoke.py --arm64-build "$BUILD_DIR" --native-build "${BUILD_DIR_NATIVE:-build}" \
    --sysroot "$SYSROOT" "$@"
}

case "${1:-all}" in
  build) build ;;
  smoke) shift; smoke "$@" ;;
  all) build; smoke ;;
  *) echo "usage: scripts/arm64.sh [build | smoke [STEP...]]" >&2; exit 2 ;;
esac
