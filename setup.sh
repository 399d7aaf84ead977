#!/usr/bin/env bash
# One command on a fresh machine: installs every dependency, builds llama.cpp
# (once, cached in ~/.cache/hone) and hone, then runs the main job
# (scripts/main-job.sh) on a model that needs nothing from you: a synthetic
# Qwen2.5-0.5B (real shapes, real tokenizer, random weights), quantized to
# Q4_K_M, probed, inspected and run.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install-deps.sh
bash scripts/install-node-deps.sh
bash scripts/build-hone.sh
bash scripts/main-job.sh
echo; echo "Done. Run the tests with: ./test.sh"
