#!/usr/bin/env bash
# Fuzzes hone's untrusted-input parsers with libFuzzer (ASan + UBSan):
# the OpenAI/Anthropic and Ollama request parsers, the JSON-schema grammar
# converter and the GGUF header reader (tests/fuzz/). The targets come from
# build-asan (scripts/sanitize.sh asan builds them).
#
# Runs every target for TOTAL/4 executions (TOTAL: 10 million by default),
# two at a time, growing the corpus in bench/results/fuzz-corpus/<target>/
# (merged to a minimal set at the end) from the seeds in tests/fuzz/corpus.
# Writes bench/results/fuzz-<date>.md: executions, speed, coverage, corpus
# size and every crash, leak, timeout or out-of-memory input (kept beside it).
#
# Usage: bench/fuzz.sh   (TOTAL, BUILD_DIR, FUZZ_TARGETS="a b" may be set)
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-10000000}
BUILD=${BUILD_DIR:-build-asan}
read -r -a TARGETS <<<"${FUZZ_TARGETS:-openai_request ollama_request json_schema gguf_header}"
PER=$((TOTAL / 4))  # each target's share of TOTAL over all four, also when FUZZ_TARGETS picks fewer
for t in "${TARGETS[@]}"; do
  [ -x "$BUILD/tests/fuzz_$t" ] || { echo "no $BUILD/tests/fuzz_$t: run scripts/sanitize.sh asan first" >&2; exit 1; }
done
STAMP=$(date -u +%Y%m%d-%H%M)
RESULTS=bench/results
LOGS=${TMPDIR:-/tmp}/hone-fuzz-$STAMP
ART=$RESULTS/fuzz-artifacts-$STAMP
mkdir -p "$LOGS"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export LSAN_OPTIONS="suppressions=$(pwd)/scripts/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

run() {  # TARGET
  local t=$1 seeds=tests/fuzz/corpus/$1 corpus=$RESULTS/fuzz-corpus/$1
  [ "$t" = gguf_header ] && seeds=$BUILD/fuzz-seeds/gguf_header
  mkdir -p "$corpus" "$ART"
  echo "[fuzz] $t: $PER executions" >&2
  "$BUILD/tests/fuzz_$t" -runs="$PER" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$ART/$t-" "$corpus" "$seeds" >"$LOGS/$t.log" 2>&1 || true
  # A minimal corpus with the same coverage is what gets kept.
  rm -rf "$corpus.min" && mkdir -p "$corpus.min"
  "$BUILD/tests/fuzz_$t" -merge=1 "$corpus.min" "$corpus" >"$LOGS/$t.merge.log" 2>&1 && rm -rf "$corpus" && mv "$corpus.min" "$corpus"
}

# Two at a time: this is sized for a 2-core machine.
for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
  run "${TARGETS[$i]}" &
  [ $((i + 1)) -lt ${#TARGETS[@]} ] && run "${TARGETS[$((i + 1))]}" &
  wait
done

OUT=$RESULTS/fuzz-vm-$STAMP.md
total=0
{
  echo "# libFuzzer runs ($STAMP)"
  echo
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; clang $(clang++ --version | head -1 | grep -o '[0-9][0-9.]*' | head -1), ASan + UBSan;" \
       "commit $(git rev-parse --short HEAD). Command: \`bench/fuzz.sh\` (TOTAL=$TOTAL)."
  echo
  echo "| target | executions | exec/s | coverage (edges) | features | corpus (minimized) | peak RSS MB | findings |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$OUT"
for t in "${TARGETS[@]}"; do
  log=$LOGS/$t.log
  execs=$(grep -o 'stat::number_of_executed_units:[[:space:]]*[0-9]*' "$log" | awk '{print $2}' || true)
  speed=$(grep -o 'stat::average_exec_per_sec:[[:space:]]*[0-9]*' "$log" | awk '{print $2}' || true)
  rss=$(grep -o 'stat::peak_rss_mb:[[:space:]]*[0-9]*' "$log" | awk '{print $2}' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  files=$(ls "$RESULTS/fuzz-corpus/$t" 2>/dev/null | wc -l || true)
  found=$(ls "$ART" 2>/dev/null | grep "^$t-" | tr '\n' ' ' || true)
  summary=$(grep -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY:" "$log" | cut -c1-160 || true)
  total=$((total + ${execs:-0}))
  echo "| $t | ${execs:-?} | ${speed:-?} | ${cov:-?} | ${ft:-?} | $files files | ${rss:-?} | ${found:-none}${summary:+ ($summary)} |" >>"$OUT"
done
{
  echo
  echo "Total executions: $total. Inputs that" \
       "crashed, leaked, timed out or ran out of memory would be in \`$ART/\` (reproduce with" \
       "\`build-asan/tests/fuzz_<target> <file>\`)."
} >>"$OUT"
rmdir "$ART" 2>/dev/null || true
# The corpus travels as one archive (the folder is git-ignored: thousands of files).
tar -C "$RESULTS" -czf "$RESULTS/fuzz-corpus-$STAMP.tar.gz" fuzz-corpus
echo "Corpus: \`bench/results/fuzz-corpus-$STAMP.tar.gz\` ($(du -h "$RESULTS/fuzz-corpus-$STAMP.tar.gz" | cut -f1); unpack into bench/results/ to resume)." >>"$OUT"
cat "$OUT"
echo "[fuzz] written to $OUT (logs in $LOGS)" >&2
