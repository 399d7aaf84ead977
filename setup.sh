#!/usr/bin/env bash
# One command on a fresh machine: installs every dependency, builds llama.cpp
# (once, cached in ~/.cache/hone) and hone, then runs the main job on a model
# that needs nothing from you: a synthetic Qwen2.5-0.5B (real shapes, real
# tokenizer, random weights), quantized to Q4_K_M, probed, inspected and run.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install-deps.sh
bash scripts/install-node-deps.sh
bash scripts/build-hone.sh
HONE=build/hone
PREFIX=$(bash scripts/build-llama.sh 2>/dev/null | tail -n 1)
mkdir -p models
if [ ! -f models/qwen2.5-0.5b.f16.gguf ]; then
  $HONE synth --like qwen2.5-0.5b --out models/qwen2.5-0.5b.f16.gguf
fi
if [ ! -f models/qwen2.5-0.5b.Q4_K_M.gguf ]; then
  # Until `hone quantize` lands, the peer llama-quantize from the same tree makes it.
  "$PREFIX/bin/llama-quantize" models/qwen2.5-0.5b.f16.gguf models/qwen2.5-0.5b.Q4_K_M.gguf Q4_K_M >/dev/null 2>&1
fi
echo; echo "== hone info"; $HONE info
echo; echo "== hone inspect"; $HONE inspect models/qwen2.5-0.5b.Q4_K_M.gguf
echo; echo "== hone run (random weights: the text is gibberish, the speed is real)"
$HONE run models/qwen2.5-0.5b.Q4_K_M.gguf -p "The fastest way to serve a language model on a CPU is" -n 64 --temp 0 --ignore-eos
echo; echo "== hone run on a trained model from ../shared"
[ -f ../shared/models/stories260K.gguf ] && $HONE run ../shared/models/stories260K.gguf -p "Once upon a time" -n 64 --temp 0
echo; echo "Done. Run the tests with: ./test.sh"
