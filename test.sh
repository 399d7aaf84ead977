#!/usr/bin/env bash
# Runs every test: builds what is missing (deps, llama.cpp cache, hone), then CTest.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install-deps.sh
bash scripts/install-node-deps.sh
bash scripts/build-hone.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${JOBS:-2}" --timeout 900 "$@"
