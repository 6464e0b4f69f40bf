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
# Records whose entry cannot be traced are told apart: riscv64 =8,4 without
# -falign-functions=8 leaves most entries off the 8 bytes its sites need.
if [ -f "$fixtures/libfx_rv64_gcc_p8_4_align2.so" ]; then
  expect 0 '	misaligned	' 'cannot be traced: .*-falign-functions=8' -- \
    list "$fixtures/libfx_rv64_gcc_p8_4_align2.so"
  grep -q '	slot	' "$tmp/out" || fail "list: no aligned site of the align2 fixture listed as slot"
  expect 0 '	slot	' '' -- list "$fixtures/libfx_rv64_gcc_p8_4.so"
  grep -Eq 'misaligned|no-sled' "$tmp/out" && fail "list: an aligned riscv64 fixture has untraceable sites"
  grep -q 'cannot be traced' "$tmp/err" && fail "list: an aligned riscv64 fixture has untraceable sites"
fi

# Bad input: one clear line, non-zero, nothing on stdout.
expect 1 '' 'cannot open /nonexistent/file' -- list /nonexistent/file
expect 1 '' 'has no patchable function entries' -- list "$fixtures/libfx_noflag.so"
expect 1 '' 'no patchable function of .* matches include: nothing\*' -- \
  list "$fixtures/libfx_gcc_p5.so" --filter 'nothing*'
expect 1 '' 'not|ELF' -- list "$0"
expect 106 '' 'subcommand' --

# run: what follows PROG is PROG's, dashes and all, after repeatable options
# and after --args (an optional value, which CLI11 ended at the `--`).
expect 0 '^[-]x[-][-]plugin z' '' -- run --relocate --filter 'libc.so.6!malloc' --args -- /bin/echo -n -x--plugin z
expect 0 '^[-]e[-]n done' '' -- run --plugin count --filter 'libc.so.6!malloc' --relocate -- /bin/echo -e-n done

# -v names the functions whose records the toolchain dropped (found by
# their sleds, core/sled_recovery.h), read while the agent attaches.
expect 0 'dr_shared' '^ftjit run: rc_dropped_p5_g: 1 site recovered without a record: its entry is the =5 sled' -- \
  run -v --plugin count -- "$fixtures/rc_dropped_p5_g"

# A report format and file per plugin (the spec's host keys format= and
# output=): both files written by one run in their own format, not
# --format's, nothing else on stdout. Two plugins on one relocated function
# that runs (malloc) share its site through call-ops, whose slot in the stub
# is behind an endbr64: the program must live and both count its calls.
expect 0 '^hi$' '' -- run --format text --plugin "count:format=json,output=$tmp/count.json" \
  --plugin "latency:format=json,output=$tmp/latency.json" --filter 'libc.so.6!malloc' --relocate -- /bin/echo hi
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "two plugins to their files: stdout $(cat "$tmp/out")"
grep -q '"name": *"malloc"' "$tmp/count.json" || fail "count:output=: $(cat "$tmp/count.json")"
grep -q '"unit"' "$tmp/latency.json" || fail "latency:output=: $(cat "$tmp/latency.json")"
expect 0 '^hi$' '' -- run --strategy call-ops --plugin "count:output=$tmp/count.txt" --filter 'libc.so.6!malloc' \
  --relocate -- /bin/echo hi
grep -q 'malloc' "$tmp/count.txt" || fail "call-ops on a relocated entry: $(cat "$tmp/count.txt")"
# ... and what is refused, before any process is approached: one line, 1.
expect 1 '' "^ftjit attach: output '$tmp/same' given to two plugins \(count and latency\): each report needs a file of its own$" -- \
  attach -p 1 --plugin "count:output=$tmp/same" --plugin "latency:output=$tmp/same"
expect 1 '' "^ftjit attach: -o $tmp/o is flame's pprof profile alone: give the other plugins output=FILE$" -- \
  attach -p 1 --plugin flame:format=pprof --plugin count -o "$tmp/o"
expect 1 '' "^ftjit attach: -o $tmp/o: every plugin has a file of its own \(output=\), nothing would go there$" -- \
  attach -p 1 --plugin "count:output=$tmp/c" -o "$tmp/o"
expect 1 '' "^ftjit attach: bad plugin spec 'count:format=json,format=tsv': 'format' given twice$" -- \
  attach -p 1 --plugin count:format=json,format=tsv
expect 1 '' "^ftjit attach: bad plugin spec 'trace:output=': 'output=' needs a value \(a file\)$" -- \
  attach -p 1 --plugin trace:output=
expect 1 '' "^ftjit attach: --opt 'count.output=x': output is ftjit's, not a plugin option: write --plugin count:output=x$" -- \
  attach -p 1 --plugin count --plugin latency --opt count.output=x
expect 1 '' "^ftjit attach: --plugin count:format=pprof: only the flame plugin's report converts to pprof, not count's$" -- \
  attach -p 1 --plugin count:format=pprof,output=x
expect 1 '' "^ftjit attach: --format pprof writes a binary \(gzipped\) file: give -o FILE or flame:output=FILE$" -- \
  attach -p 1 --plugin flame --format pprof
# Checked by the agent: a format the plugin lacks, an option it does not know.
expect 1 '' "plugin 'count' does not support format 'chrome'" -- \
  run --plugin count:format=chrome,output="$tmp/c" --plugin latency -- /bin/echo hi
expect 1 '' "outptu" -- run --plugin count:outptu=x -- /bin/echo hi

# Refused option values: exactly one line saying what is allowed, exit 105
# (CLI11's validation status), nothing on stdout. The checks run before
# anything touches a process, so pid 1 is never approached.
# refused ARGS... -- LINE: the whole of stderr must be LINE.
refused() {
  args=""
  while [ "$1" != "--" ]; do args="$args $1"; shift; done
  shift
  want=$1
  # shellcheck disable=SC2086  # the arguments are words without spaces
  "$ftjit" $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  echo "== ftjit$args -> $rc"
  [ "$rc" = 105 ] || fail "ftjit$args: exit $rc, want 105 (stderr: $(cat "$tmp/err"))"
  [ ! -s "$tmp/out" ] || fail "ftjit$args: stdout not empty: $(cat "$tmp/out")"
  [ "$(cat "$tmp/err")" = "$want" ] || fail "ftjit$args: stderr is
$(cat "$tmp/err")
want
$want"
}
seconds='must be a number of seconds > 0 (at most 31536000, a year)'
pid='must be a process id, a whole number from 1 to 4194304'
tid='must be a thread id, a whole number from 1 to 4194304'
for cmd in attach run; do
  for v in 0 -1 abc 1e999 inf nan 0x 31536001 ''; do
    if [ "$cmd" = attach ]; then set -- attach -p 1; else set -- run; fi
    [ -n "$v" ] || continue  # an empty word cannot pass through $args
    refused "$@" --duration "$v" -- "ftjit $cmd: --duration $v: $seconds"
  done
  if [ "$cmd" = attach ]; then set -- attach -p 1; else set -- run; fi
  refused "$@" --tid 0 -- "ftjit $cmd: --tid 0: $tid"
  refused "$@" --tid 12x -- "ftjit $cmd: --tid 12x: $tid"
  refused "$@" --tid 5 --tid -7 -- "ftjit $cmd: --tid -7: $tid"
done
# The event buffers' options: a size, a policy, a wait.
size='must be a size from 1 byte to 1G (e.g. 512K, 64M)'
wait='must be a number of seconds > 0 (at most 3600, an hour)'
for cmd in attach run; do
  if [ "$cmd" = attach ]; then set -- attach -p 1; else set -- run; fi
  for v in 0 0K -1 abc nan 1.5M 2G 1073741825 99999999999999999999999 12Q; do
    refused "$@" --buffer-size "$v" -- "ftjit $cmd: --buffer-size $v: $size"
  done
  for v in 0 -1 nan inf abc 3601; do
    refused "$@" --buffer-wait "$v" -- "ftjit $cmd: --buffer-wait $v: $wait"
  done
  refused "$@" --buffer-policy ring -- "ftjit $cmd: --buffer-policy: ring not in {drop,overwrite,block}"
done
# What is accepted gets past the options (to "no process" here).
expect 1 '' '^ftjit attach: no process 4194304$' -- attach -p 4194304 --duration 0.5 --tid 1
expect 1 '' '^ftjit attach: no process 4194304$' -- attach -p 4194304 --buffer-size 1G \
  --buffer-policy overwrite --buffer-wait 0.001
for cmd in attach detach status list; do
  for v in 0 -3 x 4194305 99999999999999999999 1.5; do
    refused "$cmd" -p "$v" -- "ftjit $cmd: --pid $v: $pid"
  done
  refused "$cmd" --pid=0 -- "ftjit $cmd: --pid 0: $pid"
done
# ftjit bench passes its options to ftjit-bench, which says the same way
# (when the bench is built).
"$ftjit" bench --reps 0 >"$tmp/out" 2>"$tmp/err"
if grep -q 'ftjit-bench not found' "$tmp/err"; then
  echo "SKIP: ftjit bench (ftjit-bench not built)"
else
  for v in 0 1001 x -2 2.5; do
    refused bench --reps "$v" -- "ftjit bench: --reps $v: must be a whole number from 1 to 1000"
  done
  for v in 99999 1000000001 1e6 many; do
    refused bench --calls "$v" -- \
      "ftjit bench: --calls $v: must be a whole number from 100000 to 1000000000"
  done
fi

[ "$failures" = 0 ] && echo PASS || exit 1
