#!/usr/bin/env bash
# Sanitizer runs (clang), too slow for every CI run, so a script whose last
# result is kept in bench/results/sanitizers-*.md:
#   1. ASan + UBSan build (build-asan/, also holding the libFuzzer targets
#      bench/fuzz.sh runs): every unit test, and the node client tests
#      (official openai, ollama, @anthropic-ai/sdk clients) against its hone.
#   2. TSan build (build-tsan/): the scheduler and model-pool tests, the
#      upstream HTTP client's (each call is driven by whichever thread reads
#      it), the SQLite ledger's (the journal's writer thread), the connection
#      gate's (its epoll thread and the workers that give connections back),
#      and the slow-client and HTTP-layer node tests against its hone.
# llama.cpp itself stays the uninstrumented pinned build: these check hone.
#
# Usage: scripts/sanitize.sh [asan|tsan|all]   (JOBS may be set)
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
JOBS=${JOBS:-$(nproc)}
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "[sanitize] installing clang and its runtimes (libFuzzer, ASan, TSan)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
fi
bash scripts/install-node-deps.sh >/dev/null
PREFIX=$(bash scripts/build-llama.sh | tail -n 1)
SRC_DIR=$(cd "$PREFIX/../src" && pwd)
export HONE_PEER_BIN_DIR="$PREFIX/bin"
STAMP=$(date -u +%Y%m%d-%H%M)
OUT=bench/results/sanitizers-vm-$STAMP.md
LOG_DIR=${TMPDIR:-/tmp}/hone-sanitize-$STAMP
mkdir -p "$LOG_DIR"
SUPP=$(pwd)/scripts/sanitizers
{
  echo "# Sanitizer runs ($STAMP)"
  echo
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; clang $(clang++ --version | head -1 | grep -o '[0-9][0-9.]*' | head -1);" \
       "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with local changes)'). Command: \`scripts/sanitize.sh $WHAT\`."
  echo
} >"$OUT"

configure() {  # DIR FLAGS [cmake args...]
  local dir=$1 flags=$2
  shift 2
  local gen=(); [ ! -f "$dir/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_PREFIX_PATH="$PREFIX" -DHONE_LLAMA_SOURCE_DIR="$SRC_DIR" "$@" >/dev/null
}

row() { echo "| $1 | $2 | $3 | $4 |" >>"$OUT"; }
echo "| build | what ran | result | log |" >>"$OUT"
echo "|---|---|---|---|" >>"$OUT"
FAILED=0

if [ "$WHAT" = asan ] || [ "$WHAT" = all ]; then
  echo "[sanitize] ASan+UBSan build in build-asan (with the libFuzzer targets)" >&2
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link" -DHONE_FUZZ=ON
  cmake --build build-asan -j "$JOBS" >"$LOG_DIR/asan-build.log" 2>&1 || { tail -30 "$LOG_DIR/asan-build.log"; exit 1; }
  # Leaks are checked (LSan) but for what the uninstrumented libraries keep
  # on purpose until exit (scripts/sanitizers/lsan.supp says which).
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=0"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # Unit tests: every GoogleTest executable, and the fuzz smoke runs.
  set +e
  ctest --test-dir build-asan -j 1 --timeout 1800 -E "serve_node_clients|route_spend_node|deploy_manifests|setup_main_job" \
    >"$LOG_DIR/asan-unit.log" 2>&1
  rc=$?
  set -e
  summary=$(grep -E "tests passed|tests failed" "$LOG_DIR/asan-unit.log" | tail -1 || true)
  failed=$(grep -E "^\s+[0-9]+ - " "$LOG_DIR/asan-unit.log" | sed 's/^ *//' | tr '\n' ';' | cut -c1-600 || true)
  row "ASan+UBSan" "ctest: unit tests, CLI/quant/tune integration tests, fuzz smoke (all but the node, deploy and setup tests)" \
      "${summary:-no summary} ${failed:+(failed: $failed)}" "$LOG_DIR/asan-unit.log"
  [ $rc -eq 0 ] || FAILED=1
  # The node client tests against the ASan hone (its stderr carries any report).
  # Reports go to files (log_path), so a leak found when a server exits
  # (which the tests do not see) is counted too.
  set +e
  (cd tests/node && HONE_BINARY=../../build-asan/hone HONE_TEST_TMP="$LOG_DIR/node-tmp" \
     ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$LOG_DIR/report" UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$LOG_DIR/report" \
     node --test --test-concurrency=1 >"$LOG_DIR/asan-node.log" 2>&1)
  rc=$?
  set -e
  pass=$(grep -E "^# pass" "$LOG_DIR/asan-node.log" | awk '{print $3}' || true)
  fail=$(grep -E "^# fail" "$LOG_DIR/asan-node.log" | awk '{print $3}' || true)
  reports=$(ls "$LOG_DIR" | grep -c '^report\.' || true)
  [ "$reports" = 0 ] || for f in "$LOG_DIR"/report.*; do echo; echo "$f:"; head -20 "$f"; done >>"$LOG_DIR/asan-node.log"
  row "ASan+UBSan" "node client tests (tests/node, every *.test.mjs) against build-asan/hone" \
      "${pass:-?} passed, ${fail:-?} failed; sanitizer reports from the servers: $reports" "$LOG_DIR/asan-node.log"
  [ $rc -eq 0 ] && [ "$reports" = 0 ] || FAILED=1
fi

if [ "$WHAT" = tsan ] || [ "$WHAT" = all ]; then
  echo "[sanitize] TSan build in build-tsan (scheduler, pool and HTTP client tests)" >&2
  configure build-tsan "-fsanitize=thread"
  cmake --build build-tsan -j "$JOBS" --target serve_tests route_tests ledger_tests api_tests hone >"$LOG_DIR/tsan-build.log" 2>&1 ||
    { tail -30 "$LOG_DIR/tsan-build.log"; exit 1; }
  set +e
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    build-tsan/tests/serve_tests --gtest_filter='SchedulerTest.*:ModelPoolTest.*' >"$LOG_DIR/tsan.log" 2>&1
  rc=$?
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    build-tsan/tests/route_tests --gtest_filter='HttpClient.*' >"$LOG_DIR/tsan-route.log" 2>&1
  rc_route=$?
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    build-tsan/tests/ledger_tests --gtest_filter='*sqlite*' >>"$LOG_DIR/tsan-route.log" 2>&1
  rc_route=$((rc_route | $?))
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    build-tsan/tests/api_tests --gtest_filter='ConnectionGate.*:RequestFraming.*' >"$LOG_DIR/tsan-gate.log" 2>&1
  rc_gate=$?
  (cd tests/node && HONE_BINARY=../../build-tsan/hone HONE_TEST_TMP="$LOG_DIR/node-tsan-tmp" \
     TSAN_OPTIONS="second_deadlock_stack=1:suppressions=$SUPP/tsan.supp:log_path=$LOG_DIR/tsan-report" \
     node --test --test-concurrency=1 slow_clients.test.mjs http_layer.test.mjs lingering_close.test.mjs \
     >"$LOG_DIR/tsan-node.log" 2>&1)
  rc_gate=$((rc_gate | $?))
  set -e
  summary=$(grep -E "^\[  (PASSED|FAILED)  \]" "$LOG_DIR/tsan.log" | tr '\n' ' ' || true)
  races=$(grep -c "WARNING: ThreadSanitizer" "$LOG_DIR/tsan.log" || true)
  row "TSan" "serve_tests: SchedulerTest.*, ModelPoolTest.*" "${summary:-no summary}; reports: $races" "$LOG_DIR/tsan.log"
  summary=$(grep -E "^\[  (PASSED|FAILED)  \]" "$LOG_DIR/tsan-route.log" | tr '\n' ' ' || true)  # two binaries
  races=$(grep -c "WARNING: ThreadSanitizer" "$LOG_DIR/tsan-route.log" || true)
  row "TSan" "route_tests: HttpClient.*; ledger_tests: the SQLite LedgerTest.* (the journal's writer thread)" "${summary:-no summary}; reports: $races" "$LOG_DIR/tsan-route.log"
  summary=$(grep -E "^\[  (PASSED|FAILED)  \]" "$LOG_DIR/tsan-gate.log" | tr '\n' ' ' || true)
  races=$(grep -c "WARNING: ThreadSanitizer" "$LOG_DIR/tsan-gate.log" || true)
  pass=$(grep -E "^# pass" "$LOG_DIR/tsan-node.log" | awk '{print $3}' || true)
  fail=$(grep -E "^# fail" "$LOG_DIR/tsan-node.log" | awk '{print $3}' || true)
  reports=$(ls "$LOG_DIR" | grep -c '^tsan-report\.' || true)
  [ "$reports" = 0 ] || for f in "$LOG_DIR"/tsan-report.*; do echo; echo "$f:"; head -40 "$f"; done >>"$LOG_DIR/tsan-node.log"
  row "TSan" "api_tests: ConnectionGate.*, RequestFraming.*; node: slow_clients, http_layer, lingering_close against build-tsan/hone" \
      "${summary:-no summary}; reports: $races; node ${pass:-?} passed, ${fail:-?} failed, reports from the servers: $reports" "$LOG_DIR/tsan-gate.log"
  [ $rc -eq 0 ] && [ $rc_route -eq 0 ] && [ $rc_gate -eq 0 ] && [ "$reports" = 0 ] || FAILED=1
fi

echo >>"$OUT"
echo "Logs stay in $LOG_DIR on the machine that ran them." >>"$OUT"
cat "$OUT"
echo "[sanitize] written to $OUT" >&2
exit $FAILED
