#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks the trace plugin's perfetto or chrome output with standard tools:
# protoc (our own schema, perfetto_subset.proto) and Python's json module,
# through check_trace.py. Missing tools are a failure, never a skip.
#
#   run.sh --gen GEN_TRACE --format perfetto|chrome --work DIR
#          [--mutate KIND --expect REGEX] [--relax-sequence-order]
#
# Runs gen_trace, checks its trace (which must pass). With --mutate, then
# corrupts a copy of the trace (or of the schema) and checks it again: that
# check must fail with a message matching REGEX, which shows the check can
# fail at all. --relax-sequence-order (perfetto): timestamps need only be
# non-decreasing per track, not per packet sequence.
set -u
here=$(cd "$(dirname "$0")" && pwd)
gen= format= work= mutation= expect= relax=
while [ $# -gt 0 ]; do
  case $1 in
    --gen) gen=$2; shift 2 ;;
    --format) format=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --mutate) mutation=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --relax-sequence-order) relax=--relax-sequence-order; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
die() { echo "FAIL: $*" >&2; exit 1; }
[ -n "$gen" ] && [ -n "$work" ] || die "usage: run.sh --gen GEN --format FMT --work DIR"
case $format in perfetto|chrome) ;; *) die "unknown format '$format'" ;; esac
if [ -n "$mutation" ] && [ -z "$expect" ]; then die "--mutate needs --expect"; fi

# The interpreter CMake chose (FTJIT_PYTHON3), else PATH's.
python3=${FTJIT_PYTHON3:-python3}
command -v "$python3" >/dev/null 2>&1 ||
  die "$python3 not found: this test needs it (json module, check_trace.py)"
if [ "$format" = perfetto ]; then
  command -v protoc >/dev/null 2>&1 ||
    die "protoc not found on PATH: install the Debian package protobuf-compiler"
fi

rm -rf "$work" && mkdir -p "$work/schema" || die "cannot create $work"
cp "$here/perfetto_subset.proto" "$work/schema/" || die "cannot copy the schema"
ext=pftrace
[ "$format" = chrome ] && ext=json
trace=$work/out.$ext

"$gen" "$format" "$trace" > "$work/expect.json" || die "gen_trace failed"
[ -s "$trace" ] || die "gen_trace wrote no trace"

# check TRACE SCHEMA_DIR: 0 if every check passes; messages in $work/check.log.
check() {
  : > "$work/check.log"
  if [ "$format" = perfetto ]; then
    if ! protoc -I "$2" --decode=perfetto_subset.Trace "$2/perfetto_subset.proto" \
         < "$1" > "$work/decoded.txt" 2>> "$work/check.log"; then
      echo "protoc --decode=perfetto_subset.Trace failed" >> "$work/check.log"
      return 1
    fi
    if ! protoc --decode_raw < "$1" > "$work/raw.txt" 2>> "$work/check.log"; then
      echo "protoc --decode_raw failed" >> "$work/check.log"
      return 1
    fi
    "$python3" "$here/check_trace.py" perfetto "$work/decoded.txt" "$work/raw.txt" \
      "$work/expect.json" $relax >> "$work/check.log" 2>&1
  else
    "$python3" "$here/check_trace.py" chrome "$1" "$work/expect.json" >> "$work/check.log" 2>&1
  fi
}

if ! check "$trace" "$work/schema"; then
  cat "$work/check.log" >&2
  die "$format trace $trace does not pass the checks"
fi
cat "$work/check.log"
[ -z "$mutation" ] && { echo "PASS: $format"; exit 0; }

mkdir -p "$work/bad" || die "cannot create $work/bad"
bad_schema=$work/schema
if [ "$mutation" = schema-flip ]; then
  bad_trace=$trace
  bad_schema=$work/bad
  "$python3" "$here/check_trace.py" mutate schema-flip "$here/perfetto_subset.proto" \
    "$work/bad/perfetto_subset.proto" || die "mutation failed"
else
  bad_trace=$work/bad/out.$ext
  "$python3" "$here/check_trace.py" mutate "$mutation" "$trace" "$bad_trace" ||
    die "mutation failed"
fi
if check "$bad_trace" "$bad_schema"; then
  cat "$work/check.log" >&2
  die "the $mutation corruption passed the checks"
fi
cat "$work/check.log"
grep -Eq -- "$expect" "$work/check.log" ||
  die "the $mutation corruption failed, but not with /$expect/"
echo "PASS: $format, $mutation rejected"
