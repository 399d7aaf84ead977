#!/usr/bin/env bash
# Runs on the bundle made by make_bundle.sh, on the target machine:
# probe, synthesize Qwen2.5-0.5B, quantize with the peer, decode benchmark
# against llama-bench, hone serve against llama-server, then `hone tune` for
# the chat and the server workload, and `hone run` picking up the saved profile.
# Usage: bash bench/run.sh OUT_DIR [chat-tune-budget] [server-tune-budget] [serve-reps]
set -uo pipefail
B=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?out dir}; CHAT_BUDGET=${2:-2m30s}; SERVER_BUDGET=${3:-90s}; SERVE_REPS=${4:-2}
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HONE_LLAMA_SOURCE_DIR="$B/vocab" HONE_PEER_BIN="$B/bin" HONE_PROFILE_DIR="$OUT/profiles"
mkdir -p "$B/vocab/models" "$B/models" "$OUT"
cp "$B/ggml-vocab-qwen2.gguf" "$B/vocab/models/"
H="$B/bin/hone"
stamp() { echo "[$(date +%T)] $*" | tee -a "$OUT/steps.log"; }
stamp probe
$H info --json > "$OUT/info.json" && $H info | tee "$OUT/info.txt"
stamp synth
$H synth --like qwen2.5-0.5b --out "$B/models/qwen2.5-0.5b.f16.gguf" >/dev/null
"$B/bin/llama-quantize" "$B/models/qwen2.5-0.5b.f16.gguf" "$B/models/qwen2.5-0.5b.Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
M="$B/models/qwen2.5-0.5b.Q4_K_M.gguf"
CORES=$(grep -o '"physical_cores": *[0-9]*' "$OUT/info.json" | grep -o '[0-9]*$')
command -v python3 >/dev/null || { echo "no python3: skipping the llama-bench comparison"; CORES=; }
for t in ${CORES:+$CORES}; do
  stamp "tg vs llama-bench, $t threads"
  python3 "$B/bench/tg_vs_llama_bench.py" --hone "$H" --peer-bin "$B/bin" --model "$M" --threads "$t" --reps 5 --out-dir "$OUT" 2>>"$OUT/bench.log" | tee -a "$OUT/tg.md"
done
if [ -n "$CORES" ]; then
  # Before any tune: no profile exists yet, so both servers run with defaults.
  stamp "serve vs llama-server, $SERVE_REPS reps"
  timeout 240 python3 "$B/bench/serve_vs_llama_server.py" --hone "$H" --peer-bin "$B/bin" --model "$M" --reps "$SERVE_REPS" --out-dir "$OUT" > "$OUT/serve.log" 2>&1
  echo "serve bench exit $?"; tail -25 "$OUT/serve.log"
  pkill -f "$B/bin/llama-server" ; pkill -f "$H serve" ; sleep 1  # nothing left running under the tunes
fi
stamp "tune chat $CHAT_BUDGET"
timeout 400 $H tune "$M" --workload chat --budget "$CHAT_BUDGET" --json > "$OUT/tune-chat.json" 2> "$OUT/tune-chat.log"
echo "tune exit $?"; tail -5 "$OUT/tune-chat.log"
stamp "run with the profile"
$H run "$M" -p "Hello" -n 64 --ignore-eos --temp 0 > "$OUT/run-with-profile.txt" 2>&1; tail -3 "$OUT/run-with-profile.txt"
stamp "tune server $SERVER_BUDGET"
timeout 300 $H tune "$M" --workload server --concurrency 8 --budget "$SERVER_BUDGET" --no-save --json > "$OUT/tune-server.json" 2> "$OUT/tune-server.log"
echo "tune exit $?"; tail -5 "$OUT/tune-server.log"
stamp done
