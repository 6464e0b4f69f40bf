#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite: the normal build, the arm64 leg (cross-built, run
# under qemu-aarch64), an ASan+UBSan build, a TSan build of the concurrency
# tests, and a bounded libFuzzer run of the ELF parser.
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --no-demo || exit 1

JOBS=$(nproc)
passed=0
failed=0
failures=()

flaky=()
# The lines that say why, of each test that failed again alone: printed
# again at the very end, where a CI log's tail shows them.
details=()

run_ctest() {  # name build-dir [ctest args...]
  local name=$1 dir=$2
  shift 2
  echo "== ctest ($name)"
  local log summary n_failed n_total names
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS" "$@" 2>&1 | tee "$log"
  # "100% tests passed, 0 tests failed out of 167"
  summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$summary" ]; then
    rm -f "$log"
    failed=$((failed + 1))
    failures+=("$name (no ctest summary)")
    return
  fi
  n_failed=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  n_total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  # "  123 - suite.name (Failed)": the names, for the last lines of the log.
  names=$(sed -nE 's/^\s+[0-9]+ - (.*) \((Failed|Timeout|SEGFAULT|Subprocess.*|Exception.*|Child.*|OTHER_FAULT|.*)\)$/\1 (\2)/p' "$log" |
          grep -v '(Skipped)' | tr '\n' ';')
  rm -f "$log"
  if [ "$n_failed" -ne 0 ]; then
    # Once more, alone (-j1): a test that passes then failed only under the
    # load of its neighbours on 2 cores. It still counts as passed, but is
    # named at the end of the log, so a flaky test never goes unnoticed.
    echo "== ctest ($name): re-running the failed tests alone: $names"
    log=$(mktemp)
    ctest --test-dir "$dir" --output-on-failure --rerun-failed -j1 "$@" 2>&1 | tee "$log"
    summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
    local why
    why=$(grep -E '(FAIL|Failure|rror|Expected|Which is|Value of|Assertion|stderr:|Timeout|Sanitizer)' "$log" |
          grep -v -E '^\s*[0-9]+ - |tests passed' | head -n 12)
    [ -n "$why" ] && details+=("$name: $why")
    rm -f "$log"
    local still
    still=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"${summary:-0 tests passed, $n_failed tests failed out of 0}")
    flaky+=("$name: $names (failed $n_failed, again on a re-run alone: $still)")
    n_failed=$still
  fi
  passed=$((passed + n_total - n_failed))
  failed=$((failed + n_failed))
  [ "$n_failed" -eq 0 ] || failures+=("$name: $names")
}

run_ctest normal build -LE hazard

# The attach cycles around the hazard program (tests/hazards, label
# "hazard": 50 attach/detach/unload cycles per built-in plugin, about 4
# minutes, mostly spent waiting on injections and unloads) run in the
# background while the arm64 leg, the examples and the ASan build compile;
# their result is counted before the ASan tests start.
hazard_out=$(mktemp)
hazard_state=$(mktemp)
(
  passed=0
  failed=0
  failures=()
  flaky=()
  details=()
  run_ctest hazard build -L hazard
  {
    echo "h_passed=$passed h_failed=$failed"
    declare -p failures flaky details | sed -E 's/declare -a (failures|flaky|details)/declare -a h_\1/'
  } >"$hazard_state"
) >"$hazard_out" 2>&1 &
hazard_pid=$!
finish_hazard_leg() {
  wait "$hazard_pid"
  cat "$hazard_out"
  local h_passed=0 h_failed=1 h_failures=("hazard (no result)") h_flaky=() h_details=()
  # shellcheck disable=SC1090
  [ -s "$hazard_state" ] && source "$hazard_state"
  passed=$((passed + h_passed))
  failed=$((failed + h_failed))
  failures+=("${h_failures[@]}")
  flaky+=("${h_flaky[@]}")
  details+=("${h_details[@]}")
  rm -f "$hazard_out" "$hazard_state"
}

# The arm64 leg: the backend and its harness cross-built, run as arm64
# code under qemu-aarch64 (about a minute on 2 cores).
echo "== cross-building the arm64 leg (scripts/build_aarch64.sh)"
if JOBS=$JOBS FTJIT_HOST_CLI=$PWD/build/cli/ftjit scripts/build_aarch64.sh --build-only build-aarch64 >/dev/null; then
  run_ctest aarch64-qemu build-aarch64 -L aarch64
else
  failed=$((failed + 1))
  failures+=("aarch64 build")
fi

echo "== installing into build/prefix; building the examples against it only"
rm -rf build/prefix build/examples
if cmake --install build --prefix build/prefix >/dev/null &&
   sh examples/check.sh build/prefix build/examples; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failures+=("examples")
fi

echo "== building with ASan+UBSan"
cmake -S . -B build-asan -DFTJIT_SANITIZE=address,undefined -DFTJIT_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build-asan -j"$JOBS" >/dev/null
finish_hazard_leg
# The kill sweep runs whole in the normal build; checked, a sample of it.
# The hazard cycles: once, natively, above.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  FTJIT_KILL_SWEEP=${FTJIT_ASAN_KILL_SWEEP:-30} \
  run_ctest asan+ubsan build-asan -LE hazard

echo "== building with TSan"
# Only the concurrency tests (every e2e and stress test): TSan has nothing
# to say about the parsers.
cmake -S . -B build-tsan -DFTJIT_SANITIZE=thread -DFTJIT_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
  cmake --build build-tsan -j"$JOBS" >/dev/null
FTJIT_STRESS_ITERATIONS=${FTJIT_TSAN_STRESS_ITERATIONS:-1000} TSAN_OPTIONS=halt_on_error=1 \
  run_ctest tsan build-tsan -L 'e2e|stress'

echo "== fuzzing the ELF parser for ${FUZZ_SECONDS:=60} s, the plugin spec parser for ${FUZZ_SPEC_SECONDS:=20} s, the control messages for ${FUZZ_CONTROL_SECONDS:=30} s"
if FUZZ_SECONDS=$FUZZ_SECONDS scripts/run_fuzz.sh build/fuzz build/tests/fixtures; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failures+=("fuzz")
fi

echo
for d in "${details[@]}"; do printf 'why, %s\n' "$d"; done
for f in "${flaky[@]}"; do echo "failed under load: $f"; done
((${#failures[@]})) && echo "failing parts: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
