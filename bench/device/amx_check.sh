#!/usr/bin/env bash
# Runs on a borrowed Xeon with AMX, from the repository root, on the bundle
# made by amx_bundle.sh: hone info, setup.sh's main job, one served chat, the
# tests that caught the AMX crash (isa_tests, and the five cli/quant tests
# that died on such a machine), then bench/amx_on_off.py and, with time left,
# the speculation cost curve. Every step has its own time limit.
# Usage: bash bench/device/amx_check.sh BUNDLE.tar.xz OUT_DIR [STEPS]
# STEPS (default all): info main serve isa five amx depth spec tune. Everything
# written also goes into OUT_DIR/all.tar.gz (the tool brings back 8 files).
set -uo pipefail
R=$(pwd); BUNDLE=${1:?bundle}; OUT=${2:?out dir}; STEPS=" ${3:-info main serve isa five amx depth spec tune} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$OUT"
stamp() { echo "[$(date +%T)] $*" | tee -a "$OUT/steps.log"; }
grep -m1 '^flags' /proc/cpuinfo >"$OUT/cpuflags.txt"; grep -m1 'model name' /proc/cpuinfo | tee -a "$OUT/steps.log"
[ -d /tmp/bundle ] || tar -xJf "$BUNDLE" -C /tmp
B=/tmp/bundle
# shellcheck disable=SC1091
. "$B/paths.txt"   # root=, prefix=, build=: where the binaries were built
if [ ! -e "$root" ]; then mkdir -p "$(dirname "$root")" && ln -s "$R" "$root"; fi
mkdir -p "$prefix" "$prefix/../src/models" "$root/$build/tests"
cp -a "$B/bin" "$B/lib" "$prefix/"
cp "$B/ggml-vocab-qwen2.gguf" "$prefix/../src/models/"
cp "$B/bin/hone" "$root/$build/hone"; cp "$B"/tests/* "$root/$build/tests/"
export LD_LIBRARY_PATH=$B/lib HONE_SHARED=$B/shared
H=$root/$build/hone; PEERS=$prefix/bin; M=$R/models
mkdir -p "$M"

if want info; then
stamp "hone info"
$H info | tee "$OUT/info.txt"; $H info --json >"$OUT/info.json"
fi
if [ ! -f "$M/qwen2.5-0.5b.Q4_K_M.gguf" ]; then
  $H synth --like qwen2.5-0.5b --out "$M/qwen2.5-0.5b.f16.gguf" >/dev/null &&
    "$PEERS/llama-quantize" "$M/qwen2.5-0.5b.f16.gguf" "$M/qwen2.5-0.5b.Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
fi
if want main; then
stamp "setup.sh's main job"
{
  $H run "$M/qwen2.5-0.5b.Q4_K_M.gguf" -p "The fastest way to serve a language model on a CPU is" -n 64 --temp 0 --ignore-eos
  echo "main job hone run exit $?"
  $H run "$HONE_SHARED/models/stories260K.gguf" -p "Once upon a time" -n 64 --temp 0
  echo "stories run exit $?"
} >"$OUT/main-job.txt" 2>&1
grep -E "exit|\[hone\]" "$OUT/main-job.txt"
fi

if want serve; then
stamp "hone serve: one chat to the Q4_K_M model"
$H serve -m "$M/qwen2.5-0.5b.Q4_K_M.gguf" --port 18181 >"$OUT/serve.log" 2>&1 &
SERVE=$!
timeout 60 python3 - <<'PY' 2>&1 | tee -a "$OUT/steps.log"
import json, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen("http://127.0.0.1:18181/health", timeout=2); break
    except Exception:
        time.sleep(0.5)
body = {"model": "qwen2.5-0.5b.Q4_K_M", "messages": [{"role": "user", "content": "hello " * 80}], "max_tokens": 16}
req = urllib.request.Request("http://127.0.0.1:18181/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
r = json.load(urllib.request.urlopen(req, timeout=50))
print("serve chat ok:", r["usage"])
PY
kill $SERVE 2>/dev/null; wait $SERVE; echo "serve exit $? (0: drained on SIGTERM)" | tee -a "$OUT/steps.log"
tail -3 "$OUT/serve.log"
fi

if want isa; then
stamp "isa_tests"
timeout 150 "$root/$build/tests/isa_tests" >"$OUT/isa_tests.txt" 2>&1; echo "isa_tests exit $?" | tee -a "$OUT/steps.log"
tail -4 "$OUT/isa_tests.txt"
fi
if want five; then
stamp "the five tests that died on AMX"
timeout 60 "$root/$build/tests/cli_tests" --gtest_filter='Cli.Qwen05bSynth*' >"$OUT/cli_tests.txt" 2>&1
echo "cli_tests exit $?" | tee -a "$OUT/steps.log"
timeout 120 "$root/$build/tests/quant_tests" \
  --gtest_filter='Bench.PerplexityMatchesPeerWithinOnePercent:Bench.FailedModelIsReportedAndOthersComplete:Bench.RerunUsesTheCache:Imatrix.CheckReportsKldWithAndWithout' \
  >"$OUT/quant_tests.txt" 2>&1
echo "quant_tests exit $?" | tee -a "$OUT/steps.log"
grep -E "FAILED|Failure|Expected|Which is|actual" "$OUT/quant_tests.txt" | head -20
fi

if want amx; then
stamp "amx_on_off"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/amx_on_off.py --hone "$H" --peer-bin "$PEERS" --shim "$B/amx_refuse.so" \
  --models-dir "$M" --out-dir "$OUT" --reps 3 2>&1 | tee "$OUT/amx_on_off.log" | tail -20
fi

q4_0() {
  local q
  q=$(ls "$M"/*[Qq]4_0*.gguf 2>/dev/null | head -1)
  [ -n "$q" ] || q=$($H quantize "$M/qwen2.5-0.5b.f16.gguf" --types q4_0 --out-dir "$M" --json -q |
    python3 -c "import json, sys; print(json.load(sys.stdin)['outputs'][0]['path'])")
  echo "$q"
}

if want depth; then
# Decode after a long prompt against decode from an empty context, hone and
# the peer (llama-bench -d: the depth at which it measures tg).
stamp "decode at depth 0 and 512 (Q4_0)"
Q=$(q4_0)
{
  for d in 0 512; do
    p=$(python3 -c "print('hello ' * max($d, 1))")
    for i in 1 2 3; do
      $H run "$Q" -p "$p" -n 64 --ignore-eos --temp 0 -t 16 -c 1024 --no-profile --json 2>/dev/null |
        python3 -c "import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index('{'):]); print('hone depth', $d, 'prompt', j['prompt_tokens'], 'tg', round(j['gen_tps'], 1))"
    done
  done
  "$PEERS/llama-bench" -m "$Q" -p 0 -n 64 -d 0,512 -t 16 -r 3 -o md
} >"$OUT/depth.txt" 2>&1
cat "$OUT/depth.txt"
fi

if want spec; then
stamp "spec cost curve (0.5B), if time is left"
PYTHONUNBUFFERED=1 timeout "${SPEC_SECONDS:-90}" python3 bench/spec_cost_curve.py --hone "$H" --peer-bin "$PEERS" \
  --model "$M/qwen2.5-0.5b.Q4_K_M.gguf" --reps 1 --out-dir "$OUT" >"$OUT/spec.log" 2>&1
echo "spec exit $?" | tee -a "$OUT/steps.log"; tail -12 "$OUT"/spec_cost_curve-*.md 2>/dev/null
fi
if want tune; then
stamp "hone tune (Q4_0, chat): AMX on and off are among its candidates"
HONE_PROFILE_DIR=$OUT/profiles timeout 240 $H tune "$(q4_0)" --budget "${TUNE_BUDGET:-100s}" --spec none --json >"$OUT/tune.json" 2>"$OUT/tune.log"
echo "tune exit $?" | tee -a "$OUT/steps.log"
python3 - "$OUT/tune.json" <<'PY'
import json, sys
t = open(sys.argv[1]).read(); j = json.loads(t[t.index("{"):])
trials = j["trials"]
off = [x for x in trials if "no-amx" in x["config"]]
print(f"{len(trials)} trials, {len(off)} with AMX off; best: {j['best']}")
for x in trials:
    print(f"  {x['score']:8.1f}  {x['config']}  {x.get('error', '')}")
PY
fi
stamp done
tar -C "$OUT" -czf /tmp/all.tar.gz . && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
