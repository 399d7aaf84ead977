#!/usr/bin/env bash
# setup.sh's main job, on a model that needs nothing from the user: a synthetic
# Qwen2.5-0.5B (real shapes, real tokenizer, random weights) quantized to
# Q4_K_M, then probed, inspected and run with the default load options
# (repacking, and AMX where the CPU has it). The test suite runs this same
# script (ctest: setup_main_job), so a crash here fails CI.
#   HONE        the hone binary (default build/hone)
#   MODELS_DIR  where the models go (default models/)
set -euo pipefail
trap 'echo "[main-job] failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
HONE=${HONE:-build/hone}
MODELS=${MODELS_DIR:-models}
PREFIX=$(bash scripts/build-llama.sh 2>/dev/null | tail -n 1)
mkdir -p "$MODELS"
if [ ! -f "$MODELS/qwen2.5-0.5b.f16.gguf" ]; then
  "$HONE" synth --like qwen2.5-0.5b --out "$MODELS/qwen2.5-0.5b.f16.gguf"
fi
if [ ! -f "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf" ]; then
  # The peer llama-quantize from the same tree (written to a temporary name
  # first, so an interrupted run never leaves a half file behind).
  "$PREFIX/bin/llama-quantize" "$MODELS/qwen2.5-0.5b.f16.gguf" "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf.part" Q4_K_M >/dev/null 2>&1
  mv "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf.part" "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf"
fi
echo; echo "== hone info"; "$HONE" info
echo; echo "== hone inspect"; "$HONE" inspect "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf"
echo; echo "== hone run (random weights: the text is gibberish, the speed is real)"
"$HONE" run "$MODELS/qwen2.5-0.5b.Q4_K_M.gguf" -p "The fastest way to serve a language model on a CPU is" -n 64 --temp 0 --ignore-eos
echo; echo "== hone run on a trained model from ../shared"
if [ -f ../shared/models/stories260K.gguf ]; then
  "$HONE" run ../shared/models/stories260K.gguf -p "Once upon a time" -n 64 --temp 0
fi
echo
echo "== chat in a browser: build/hone serve -m ../shared/models/stories260K.gguf -m $MODELS/qwen2.5-0.5b.Q4_K_M.gguf"
echo "   then open the printed http://127.0.0.1:8080/ui/ (the web console; --no-ui turns it off)"
