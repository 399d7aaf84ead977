#!/usr/bin/env bash
# Runs on the bundle made by make_bundle.sh, on the target machine:
# probe, synthesize Qwen2.5-0.5B, quantize with the peer, decode benchmark
# against llama-bench, and (when the bundle's hone has it) a tune.
# Usage: bash bench/run.sh OUT_DIR [tune-budget]
set -uo pipefail
B=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?out dir}; BUDGET=${2:-3m}
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HONE_LLAMA_SOURCE_DIR="$B/vocab" HONE_PEER_BIN="$B/bin" HONE_PROFILE_DIR="$OUT/profiles"
mkdir -p "$B/vocab/models" "$B/models" "$OUT"
cp "$B/ggml-vocab-qwen2.gguf" "$B/vocab/models/"
H="$B/bin/hone"
$H info --json > "$OUT/info.json" && $H info | tee "$OUT/info.txt"
$H synth --like qwen2.5-0.5b --out "$B/models/qwen2.5-0.5b.f16.gguf" >/dev/null
"$B/bin/llama-quantize" "$B/models/qwen2.5-0.5b.f16.gguf" "$B/models/qwen2.5-0.5b.Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
M="$B/models/qwen2.5-0.5b.Q4_K_M.gguf"
CORES=$(python3 -c "import json;print(json.load(open('$OUT/info.json'))['physical_cores'])")
for t in $CORES $((CORES/2)); do
  python3 "$B/bench/tg_vs_llama_bench.py" --hone "$H" --peer-bin "$B/bin" --model "$M" --threads "$t" --reps 5 --out-dir "$OUT" 2>>"$OUT/bench.log" | tee -a "$OUT/tg.md"
done
if $H tune --help >/dev/null 2>&1; then
  timeout 300 $H tune "$M" --workload chat --budget "$BUDGET" --json > "$OUT/tune.json" 2> "$OUT/tune.log"
  echo "tune exit $?"; tail -30 "$OUT/tune.log"
  $H run "$M" -p "Hello" -n 64 --ignore-eos --temp 0 2>&1 | tail -2 | tee "$OUT/run-with-profile.txt"
fi
