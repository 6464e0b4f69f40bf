#!/bin/sh
# SPDX-License-Identifier: MIT
# The ftjit command line: each case checks the exit status, stdout (the
# result, nothing else) and the one-line error on stderr.
#   cli_test.sh FTJIT FIXTURE_DIR
set -u
ftjit=$1
fixtures=$2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect STATUS STDOUT_REGEX STDERR_REGEX -- ARGS...
expect() {
  want_rc=$1 out_re=$2 err_re=$3
  shift 4
  "$ftjit" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  echo "== ftjit $* -> $rc"
  [ "$rc" = "$want_rc" ] || fail "ftjit $*: exit $rc, want $want_rc (stderr: $(cat "$tmp/err"))"
  if [ -n "$out_re" ]; then
    grep -Eq "$out_re" "$tmp/out" || fail "ftjit $*: stdout lacks /$out_re/: $(cat "$tmp/out")"
  else
    [ ! -s "$tmp/out" ] || fail "ftjit $*: stdout not empty: $(cat "$tmp/out")"
  fi
  if [ -n "$err_re" ]; then
    grep -Eq "$err_re" "$tmp/err" || fail "ftjit $*: stderr lacks /$err_re/: $(cat "$tmp/err")"
  fi
}

# Plugins: the four built-ins, each with its formats.
expect 0 '^count ' '' -- plugins
for p in count trace latency flame; do
  grep -q "^$p " "$tmp/out" || fail "plugins: $p not listed"
done
grep -q 'formats: text, chrome, perfetto' "$tmp/out" || fail "plugins: trace's formats"

# list: every patchable function of a fixture, C++ names demangled, the
# layout told apart.
expect 0 '	slot	ns::widget::frob\(int\)$' '11 of 11 patchable functions' -- \
  list "$fixtures/libfx_gcc_p13_8.so"
[ "$(wc -l <"$tmp/out")" = 11 ] || fail "list: $(wc -l <"$tmp/out") lines, want 11"
grep -q 'fx_optout' "$tmp/out" && fail "list: the opted-out function is listed"
expect 0 '	entry	fx_add$' '' -- list "$fixtures/libfx_clang_p5.so" --filter 'fx_a*'
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "list --filter fx_a*: $(cat "$tmp/out")"
expect 0 'fx_over\(double\)' '' -- list "$fixtures/libfx_gcc_p5.so" --filter 'fx_over*' \
  --exclude 'fx_over(int)'
grep -q 'fx_over(int)' "$tmp/out" && fail "list --exclude: fx_over(int) listed"

# Bad input: one clear line, non-zero, nothing on stdout.
expect 1 '' 'cannot open /nonexistent/file' -- list /nonexistent/file
expect 1 '' 'has no patchable function entries' -- list "$fixtures/libfx_noflag.so"
expect 1 '' 'no patchable function of .* matches include: nothing\*' -- \
  list "$fixtures/libfx_gcc_p5.so" --filter 'nothing*'
expect 1 '' 'not|ELF' -- list "$0"
expect 106 '' 'subcommand' --

[ "$failures" = 0 ] && echo PASS || exit 1
