#!/usr/bin/env bash
# Installs every system package hone needs to build and test (Debian).
# Idempotent: packages already present are skipped by apt-get.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build git pkg-config ccache
  libhwloc-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libssl-dev libcurl4-openssl-dev
  libsqlite3-dev libpq-dev postgresql tzdata
  curl clang-format clang-tidy python3  # clang-tidy: the function-size check (scripts/check_layout.py)
  # cpp-httplib is the 0.54 vendored in the pinned llama.cpp tree (scripts/build-llama.sh), not a package
  prometheus  # promtool: tests lint /metrics with `promtool check metrics`
  wrk  # bench/router_overhead.mjs: the serial figures from a C client
  chromium  # the web console's browser tests (tests/node/console.browser.mjs, puppeteer-core)
)
# The arm64 cross toolchain, qemu and arm64 -dev packages: scripts/arm64.sh.
missing=()
# Node.js: any install with npm will do (some images ship NodeSource builds that
# conflict with Debian's npm package), so only ask apt for it when absent.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[deps] all system packages present"
fi
# kubectl renders the Kubernetes manifests for their checks (deploy/validate,
# the deploy_manifests test). Debian has no kubectl package, so this only says
# what is missing: the other tests do not need it.
if ! command -v kubectl >/dev/null; then
  echo "[deps] kubectl not found: the deploy checks (deploy/validate, ctest -R deploy_manifests) need it;" \
       "install kubectl >= 1.27 from the Kubernetes release packages (https://kubernetes.io/docs/tasks/tools/)" >&2
fi
