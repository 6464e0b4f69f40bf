#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one exit-hook program untraced and traced and checks that tracing
# changed nothing the program can see (stdout byte for byte, exit status)
# and that the harness's summary (stderr) shows every entry paired with
# exactly one exit.
#
#   run.sh --exe PROGRAM --strategy generated|list|call-ops|auto
#          [--entry-only]          entry callbacks only; exit checks skipped
#          [--min-unwound N]       at least N exits were unwinds (ret == NULL)
#          [--no-unwound]          no exit was an unwind
#          [--min-depth N]         some thread reached N traced frames
#          [--min-depth-stdout K]  ... where N is the program's "K: N" line
#          [--max-depth N]         no thread went deeper (a leak would)
#          [--children N]          N forked children printed a summary too
#          [--runner "CMD ARGS"]   run the program through an emulator
#                                  (qemu-aarch64 -L SYSROOT for arm64 builds)
set -u

exe= strategy= entry_only=0 min_unwound=0 no_unwound=0 min_depth=0 min_depth_key=
max_depth= children=0 runner=
while [ $# -gt 0 ]; do
  case $1 in
    --exe) exe=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --entry-only) entry_only=1; shift ;;
    --min-unwound) min_unwound=$2; shift 2 ;;
    --no-unwound) no_unwound=1; shift ;;
    --min-depth) min_depth=$2; shift 2 ;;
    --min-depth-stdout) min_depth_key=$2; shift 2 ;;
    --max-depth) max_depth=$2; shift 2 ;;
    --children) children=$2; shift 2 ;;
    --runner) runner=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$exe" ] && [ -n "$strategy" ] || { echo "run.sh: --exe and --strategy are required" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The untraced reference. FTJIT_SELFTRACE may leak in from a caller.
env -u FTJIT_SELFTRACE -u FTJIT_SELFTRACE_ENTRY_ONLY $runner "$exe" >"$tmp/ref.out" 2>"$tmp/ref.err"
ref_rc=$?
if [ "$entry_only" = 1 ]; then
  FTJIT_SELFTRACE=$strategy FTJIT_SELFTRACE_ENTRY_ONLY=1 $runner "$exe" >"$tmp/tr.out" 2>"$tmp/tr.err"
else
  env -u FTJIT_SELFTRACE_ENTRY_ONLY FTJIT_SELFTRACE=$strategy $runner "$exe" >"$tmp/tr.out" 2>"$tmp/tr.err"
fi
tr_rc=$?

echo "== $exe, strategy $strategy$( [ "$entry_only" = 1 ] && echo ', entry only')"
echo "-- untraced: exit $ref_rc, $(wc -l <"$tmp/ref.out") stdout lines"
echo "-- traced: exit $tr_rc; stderr:"
cat "$tmp/tr.err"

[ "$ref_rc" = 0 ] || fail "the untraced run exited with $ref_rc (stderr: $(cat "$tmp/ref.err"))"
[ "$tr_rc" = "$ref_rc" ] || fail "exit status $tr_rc traced, $ref_rc untraced"
if ! cmp -s "$tmp/ref.out" "$tmp/tr.out"; then
  fail "stdout differs (untraced vs traced):"
  diff -u "$tmp/ref.out" "$tmp/tr.out" | head -40
fi
if grep -q 'selftrace: ' "$tmp/ref.err"; then
  fail "the untraced run printed a summary: the harness traced without FTJIT_SELFTRACE"
fi

# field NAME LINE: the value of NAME=value in a summary line.
field() {
  printf '%s\n' "$2" | sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p"
}

# check_summary WHO LINE: the checks every summary must pass.
check_summary() {
  who=$1 line=$2
  for name in entries exits unwound max_depth mismatches leftover overflow map_failures \
      frames_unwound exit_hook_drops engine_depth skew; do
    [ -n "$(field $name "$line")" ] || { fail "$who: no $name= in the summary"; return; }
  done
  entries=$(field entries "$line") exits=$(field exits "$line") unwound=$(field unwound "$line")
  depth=$(field max_depth "$line")
  [ "$entries" -gt 0 ] || fail "$who: no traced entry at all"
  for name in mismatches overflow map_failures; do
    [ "$(field $name "$line")" = 0 ] || fail "$who: $name=$(field $name "$line")"
  done
  if [ "$entry_only" = 1 ]; then
    [ "$exits" = 0 ] || fail "$who: $exits exit callbacks without an exit_func"
    return
  fi
  [ "$exits" = "$entries" ] || fail "$who: $entries entries but $exits exits"
  [ "$(field leftover "$line")" = 0 ] ||
    fail "$who: $(field leftover "$line") entries left open on threads that finished"
  [ "$(field engine_depth "$line")" = 0 ] ||
    fail "$who: the engine's shadow stack still holds $(field engine_depth "$line") frames at the end"
  [ "$(field exit_hook_drops "$line")" = 0 ] ||
    fail "$who: the engine did not hook $(field exit_hook_drops "$line") exits (shadow stack full)"
  [ "$(field frames_unwound "$line")" = "$unwound" ] ||
    fail "$who: the engine counts $(field frames_unwound "$line") unwound frames, the exit callbacks saw $unwound"
  skew=$(field skew "$line")
  [ "${skew%..*}" = "${skew#*..}" ] ||
    fail "$who: the engine's shadow depth and the callbacks' disagree (skew $skew)"
}

summary=$(grep '^selftrace: strategy=' "$tmp/tr.err")
nsum=$(grep -c '^selftrace: strategy=' "$tmp/tr.err")
if [ "$nsum" != 1 ]; then
  fail "expected one summary line, found $nsum"
else
  check_summary "process" "$summary"
  if [ "$entry_only" = 0 ]; then
    if [ -n "$min_depth_key" ]; then
      min_depth=$(sed -n "s/^$min_depth_key: \\([0-9]*\\)\$/\\1/p" "$tmp/ref.out")
      [ -n "$min_depth" ] || { fail "no '$min_depth_key: N' line in stdout"; min_depth=0; }
    fi
    [ "$unwound" -ge "$min_unwound" ] || fail "$unwound unwound exits, expected at least $min_unwound"
    [ "$no_unwound" = 0 ] || [ "$unwound" = 0 ] ||
      fail "$unwound exits reported unwound in a program that never leaves a frame early"
    [ "$depth" -ge "$min_depth" ] || fail "max depth $depth, expected at least $min_depth"
    [ -z "$max_depth" ] || [ "$depth" -le "$max_depth" ] ||
      fail "max depth $depth exceeds $max_depth: unwound frames stay on the stack"
  fi
fi

nchild=$(grep -c '^child selftrace: strategy=' "$tmp/tr.err")
[ "$nchild" = "$children" ] || fail "expected $children child summaries, found $nchild"
i=0
grep '^child selftrace: strategy=' "$tmp/tr.err" >"$tmp/children"
while IFS= read -r line; do
  i=$((i + 1))
  check_summary "child $i" "$line"
  [ "$no_unwound" = 0 ] || [ "$entry_only" = 1 ] || [ "$(field unwound "$line")" = 0 ] ||
    fail "child $i: exits reported unwound in a program that never leaves a frame early"
done <"$tmp/children"

if [ "$failures" -gt 0 ]; then
  echo "== $failures check(s) failed"
  exit 1
fi
echo "== ok"
