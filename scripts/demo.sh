#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The demo: start the bundled multi-threaded service (it has no ftjit
# inside), attach the `count` plugin to it from outside while it runs,
# print its top functions, detach, and let it finish normally.
#
# usage: scripts/demo.sh [build dir (default build)]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$BUILD/demo/ftjit-demo-service" 4 >"$out" &
pid=$!
# Attach once it runs (its first line says so).
for _ in $(seq 100); do
  [ -s "$out" ] && break
  sleep 0.05
done
echo "== ftjit attach -p $pid: counting calls of demo_* for 1.5 s while 4 threads work"
"$BUILD/cli/ftjit" attach -p "$pid" --plugin count:top=10 --filter 'demo_*' --duration 1.5 -v
echo "== detached; the service finishes on its own"
status=0
wait "$pid" || status=$?
cat "$out"
if [ "$status" -ne 0 ]; then
  echo "demo: the service exited with status $status" >&2
  exit 1
fi
