#!/bin/sh
# SPDX-License-Identifier: MIT
# The cancellation scenario of the exceptions program, traced with each
# strategy: cancelled, exit status 0, and a clean summary (every entry
# paired with one exit, LIFO, nothing left over). See CMakeLists.txt for
# why the destructor count may differ from the untraced run.
set -u
exe=$1
failures=0
for strategy in generated list; do
  out=$(FTJIT_SELFTRACE=$strategy "$exe" cancel 2>"${TMPDIR:-/tmp}/cancel.$$.err")
  rc=$?
  err=$(cat "${TMPDIR:-/tmp}/cancel.$$.err")
  rm -f "${TMPDIR:-/tmp}/cancel.$$.err"
  echo "== $strategy: exit $rc"
  echo "$out"
  echo "$err"
  [ "$rc" = 0 ] || { echo "FAIL: exit status $rc"; failures=$((failures + 1)); }
  echo "$out" | grep -Eq '^forced_unwind cancel: [0-9]+ destructors ran, cancelled$' ||
    { echo "FAIL: the thread was not reported cancelled"; failures=$((failures + 1)); }
  summary=$(echo "$err" | grep '^selftrace: strategy=')
  for want in 'mismatches=0' 'leftover=0' 'engine_depth=0' 'exit_hook_drops=0'; do
    echo "$summary" | grep -Eq " $want( |$)" ||
      { echo "FAIL: summary lacks $want"; failures=$((failures + 1)); }
  done
  entries=$(echo "$summary" | sed -n 's/.* entries=\([0-9]*\) .*/\1/p')
  exits=$(echo "$summary" | sed -n 's/.* exits=\([0-9]*\) .*/\1/p')
  [ -n "$entries" ] && [ "$entries" = "$exits" ] && [ "$entries" -gt 0 ] ||
    { echo "FAIL: entries=$entries exits=$exits"; failures=$((failures + 1)); }
done
[ "$failures" = 0 ] && echo "PASS" || exit 1
