#!/usr/bin/env bash
# Only the serve benchmark, on the bundle made by make_bundle.sh (one
# repetition: fits a short device lease). Usage: bash bench/serve_only.sh OUT [timeout-s]
B=$(cd "$(dirname "$0")/.." && pwd); OUT=${1:?out}
export LD_LIBRARY_PATH=$B/lib HONE_LLAMA_SOURCE_DIR=$B/vocab HONE_PROFILE_DIR=/tmp/noprof
mkdir -p $B/vocab/models $B/models $OUT; cp $B/ggml-vocab-qwen2.gguf $B/vocab/models/
$B/bin/hone synth --like qwen2.5-0.5b --out $B/models/q.f16.gguf >/dev/null
$B/bin/llama-quantize $B/models/q.f16.gguf $B/models/qwen2.5-0.5b.Q4_K_M.gguf Q4_K_M >/dev/null 2>&1
timeout ${2:-160} python3 $B/bench/serve_vs_llama_server.py --hone $B/bin/hone --peer-bin $B/bin \
  --model $B/models/qwen2.5-0.5b.Q4_K_M.gguf --reps 1 --out-dir $OUT > $OUT/serve.log 2>&1
echo "serve exit $?"; tail -30 $OUT/serve.log
