#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite: the normal build, the arm64 and riscv64 legs
# (cross-built, run under qemu-aarch64 and qemu-riscv64), an ASan+UBSan
# build, a TSan build of the concurrency tests, and a bounded libFuzzer run
# of the ELF parser.
# Prints "N passed, N failed" at the end; exits non-zero on any failure,
# and counts as one a run that left ftjit files in /tmp (named at the end).
set -uo pipefail
cd "$(dirname "$0")/.."

# What of ftjit's is in /tmp before the run: the tests must leave nothing
# more, the directory of the agents' sockets (/tmp/ftjit-UID) included:
# the last agent of a user to go removes it (control::remove_socket).
ftjit_tmp_files() {
  find /tmp -maxdepth 1 -name '*ftjit*' -print 2>/dev/null
  find /tmp -mindepth 2 -maxdepth 2 -path '/tmp/ftjit-*/*' -print 2>/dev/null
}
tmp_before=$(ftjit_tmp_files | sort)

# What each part took, in the log: the whole run must stay under 45
# minutes on 2 cores (README), and this says where they go.
took() {  # what, start (from $SECONDS)
  echo "== $1 took $((SECONDS - $2)) s (at $((SECONDS / 60)) min)"
}

# Also the arm64 and riscv64 agents and plugins (build_cross.sh
# --runtime-only), whose trees the cross legs below complete.
t0=$SECONDS
scripts/setup.sh --no-demo || exit 1
took "setup (packages, the host build, the arm64 and riscv64 agents)" "$t0"

JOBS=$(nproc)
passed=0
failed=0
failures=()

flaky=()
# The lines that say why, of each test that failed again alone: printed
# again at the very end, where a CI log's tail shows them.
details=()

run_ctest() {  # name build-dir [ctest args...]
  local name=$1 dir=$2 t0=$SECONDS
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
  took "ctest ($name)" "$t0"
}

run_ctest normal build -LE hazard

# A leg that mostly waits runs in the background while others compile:
# start_background_leg NAME ctest-args... runs run_ctest in a subshell,
# its output held back; finish_background_leg NAME prints it and counts
# its result (a leg that left no result counts as one failure).
declare -A bg_pid bg_out bg_state
start_background_leg() {  # name build-dir [ctest args...]
  local name=$1
  bg_out[$name]=$(mktemp)
  bg_state[$name]=$(mktemp)
  (
    passed=0
    failed=0
    failures=()
    flaky=()
    details=()
    run_ctest "$@"
    {
      echo "b_passed=$passed b_failed=$failed"
      declare -p failures flaky details | sed -E 's/declare -a (failures|flaky|details)/declare -a b_\1/'
    } >"${bg_state[$name]}"
  ) >"${bg_out[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
finish_background_leg() {  # name
  local name=$1
  wait "${bg_pid[$name]}"
  cat "${bg_out[$name]}"
  local b_passed=0 b_failed=1 b_failures=("$name (no result)") b_flaky=() b_details=()
  # shellcheck disable=SC1090
  [ -s "${bg_state[$name]}" ] && source "${bg_state[$name]}"
  passed=$((passed + b_passed))
  failed=$((failed + b_failed))
  failures+=("${b_failures[@]}")
  flaky+=("${b_flaky[@]}")
  details+=("${b_details[@]}")
  rm -f "${bg_out[$name]}" "${bg_state[$name]}"
}

# The attach cycles around the hazard program (tests/hazards, label
# "hazard": 50 attach/detach/unload cycles per built-in plugin, about 4
# minutes, mostly spent waiting on injections and unloads) run in the
# background while the cross legs, the examples and the ASan build
# compile; their result is counted before the ASan tests start.
start_background_leg hazard build -L hazard

# The cross legs, in the trees setup.sh began (their agents and plugins
# are built already): arm64, the backend and its harness run as arm64 code
# under qemu-aarch64 (about a minute on 2 cores); riscv64, the engine,
# agent and plugins run as riscv64 code under qemu-riscv64, their code
# generated by this build's ftjit (LLVM MC).
for leg in arm64:build-aarch64:aarch64 riscv64:build-riscv64:riscv64; do
  IFS=: read -r isa dir label <<<"$leg"
  echo "== cross-building the $isa leg (scripts/build_cross.sh $isa)"
  t0=$SECONDS
  if JOBS=$JOBS FTJIT_HOST_CLI=$PWD/build/cli/ftjit scripts/build_cross.sh "$isa" --build-only "$dir" >/dev/null; then
    took "the $isa build" "$t0"
    run_ctest "$label-qemu" "$dir" -L "$label"
    # What needs ptrace on arm64 (qemu-user has none), under Debian's arm64
    # kernel in qemu-system-aarch64, booted once (tests/kernel): in the
    # background (its kill sweeps and cycles mostly wait), counted with the
    # hazard leg's.
    [ "$isa" = arm64 ] && start_background_leg arm64-kernel "$dir" -L kernel
  else
    failed=$((failed + 1))
    failures+=("$label build")
  fi
done

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
# -O1, as the sanitizers' documentation suggests, and line tables only
# (-g1): a sanitizer's report names files and lines. ASan and UBSan
# together at -O2 took GCC 12 about 1.7 times as long per file (39 s for
# runtime/engine.cpp, 24 s at -O1), and -g a fifth more.
SANITIZER_FLAGS=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
                 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
# UBSan without its vptr, null and alignment checks: those three were
# 80% of its static data (3.0 of 3.1 MB in trace_session.o: a source
# location per checked pointer, relocated and written at each start, 64
# MB of .data in the CLI: 0.35 s a process) and half the build's time
# (trace_session.cpp: 31 s, 15 s without them, 13 s with ASan alone).
# ASan reports a null dereference itself; alignment is checked where
# ftjit reads bytes it did not write, its parsers, by the fuzzers below
# (clang's full -fsanitize=undefined).
t0=$SECONDS
cmake -S . -B build-asan -DFTJIT_SANITIZE=address,undefined -DFTJIT_NO_SANITIZE=vptr,null,alignment -DFTJIT_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${SANITIZER_FLAGS[@]}" >/dev/null && cmake --build build-asan -j"$JOBS" >/dev/null
took "the ASan+UBSan build" "$t0"
finish_background_leg hazard
[ -n "${bg_pid[arm64-kernel]:-}" ] && finish_background_leg arm64-kernel
# The kill sweep runs whole in the normal build; checked, a sample of it,
# and so the relocated entries' attach/detach cycles (1000 natively) and
# the live-control changes (1000 natively; 200 took 88 s under ASan on 2
# cores, the longest test of the leg).
# The hazard cycles: once, natively, above.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  FTJIT_KILL_SWEEP=${FTJIT_ASAN_KILL_SWEEP:-20} FTJIT_RELOC_CYCLES=150 FTJIT_LIVE_CHANGES=100 \
  run_ctest asan+ubsan build-asan -LE hazard

echo "== building with TSan"
t0=$SECONDS
# Only the concurrency tests (every e2e and stress test): TSan has nothing
# to say about the parsers, whose programs it does not build (unit tests).
cmake -S . -B build-tsan -DFTJIT_SANITIZE=thread -DFTJIT_BENCH=OFF -DFTJIT_UNIT_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${SANITIZER_FLAGS[@]}" >/dev/null &&
  cmake --build build-tsan -j"$JOBS" >/dev/null
took "the TSan build" "$t0"
# The relocated entries' cycles: 250 (1000 took 96 s of the leg's 124).
FTJIT_STRESS_ITERATIONS=${FTJIT_TSAN_STRESS_ITERATIONS:-1000} FTJIT_RELOC_CYCLES=250 TSAN_OPTIONS=halt_on_error=1 \
  run_ctest tsan build-tsan -L 'e2e|stress'

# Two lanes of 45 s (ELF then spec, control then DWARF), one per core.
echo "== fuzzing the ELF parser for ${FUZZ_SECONDS:=30} s, the plugin spec parser for ${FUZZ_SPEC_SECONDS:=15} s, the control messages for ${FUZZ_CONTROL_SECONDS:=20} s, the DWARF reader for ${FUZZ_DWARF_SECONDS:=25} s"
if FUZZ_SECONDS=$FUZZ_SECONDS FUZZ_SPEC_SECONDS=$FUZZ_SPEC_SECONDS FUZZ_CONTROL_SECONDS=$FUZZ_CONTROL_SECONDS \
   FUZZ_DWARF_SECONDS=$FUZZ_DWARF_SECONDS scripts/run_fuzz.sh build/fuzz build/tests/fixtures; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failures+=("fuzz")
fi

echo "== checking that the tests left nothing of ftjit's in /tmp"
left=$(comm -13 <(echo "$tmp_before") <(ftjit_tmp_files | sort) | grep -v '^$')
if [ -n "$left" ]; then
  echo "left in /tmp by the tests:"
  echo "$left"
  failed=$((failed + 1))
  failures+=("/tmp left: $(echo "$left" | head -n 5 | tr '\n' ' ')")
else
  passed=$((passed + 1))
fi

echo
for d in "${details[@]}"; do printf 'why, %s\n' "$d"; done
for f in "${flaky[@]}"; do echo "failed under load: $f"; done
((${#failures[@]})) && echo "failing parts: ${failures[*]}"
echo "$passed passed, $failed failed, in $((SECONDS / 60)) min $((SECONDS % 60)) s"
[ "$failed" -eq 0 ]
