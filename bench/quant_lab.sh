#!/usr/bin/env bash
# The quantization lab end to end, as the issue's "done when" describes:
#   1. quality: the trained tinystories-d256 (F32) quantized to seven types,
#      scored on the held-out TinyStories text (PPL, KLD vs F32) and the task suite;
#   2. speed: the synthetic Qwen2.5-0.5B F16 quantized to five types
#      (random weights: its quality columns say nothing, its speed columns do).
# Each step is one `hone bench --dir DIR`; the reports (md/csv/json/html) are
# copied to bench/results/quant_{tiny,qwen}-<host>-<date>.*
# Usage: bench/quant_lab.sh [HONE=build/hone] [LAB=build/quant-lab]
set -euo pipefail
cd "$(dirname "$0")/.."
HONE=${HONE:-build/hone}
LAB=${LAB:-build/quant-lab}
SHARED=${HONE_SHARED:-../shared}
STAMP="$(hostname -s | cut -c1-12)-$(date -u +%Y%m%d-%H%M)"
TINY_THREADS=${TINY_THREADS:-1}   # a 3.6M-parameter model gains nothing from a second thread

mkdir -p "$LAB/tiny" "$LAB/qwen"
ln -sf "$(realpath "$SHARED/models/tinystories-d256-l4-f32.gguf")" "$LAB/tiny/tinystories-d256-l4.F32.gguf"
"$HONE" quantize "$LAB/tiny/tinystories-d256-l4.F32.gguf" --types q8_0,q6_k,q5_k_m,q4_k_m,q3_k_m,q2_k,iq4_xs \
  --out-dir "$LAB/tiny" -q
"$HONE" bench --dir "$LAB/tiny" --corpus "$SHARED/corpora/tinystories_heldout.txt" --ctx 128 -t "$TINY_THREADS" \
  --eval evals/default.jsonl --results "$LAB/results-tiny"

[ -f models/qwen2.5-0.5b.f16.gguf ] || "$HONE" synth --like qwen2.5-0.5b --out models/qwen2.5-0.5b.f16.gguf
ln -sf "$(realpath models/qwen2.5-0.5b.f16.gguf)" "$LAB/qwen/qwen2.5-0.5b.F16.gguf"
"$HONE" quantize models/qwen2.5-0.5b.f16.gguf --types q8_0,q6_k,q5_k_m,q4_k_m,q3_k_m --out-dir "$LAB/qwen" -q
"$HONE" bench --dir "$LAB/qwen" --corpus "$SHARED/corpora/tinystories_heldout.txt" --ctx 128 --chunks 4 --no-tasks \
  --results "$LAB/results-qwen"

for k in tiny qwen; do
  for ext in md csv json html; do cp "$LAB/results-$k/bench.$ext" "bench/results/quant_$k-$STAMP.$ext"; done
done
echo "results: bench/results/quant_{tiny,qwen}-$STAMP.*"
