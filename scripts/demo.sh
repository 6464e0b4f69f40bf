#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The demo: start the bundled multi-threaded service (it has no ftjit
# inside), attach the `count` plugin to it from outside while it runs,
# print its top functions, detach, and let it finish normally. Then the
# same service built for arm64 and riscv64 runs under `ftjit run` (qemu-user,
# with the agents scripts/setup.sh cross-built and linked beside ftjit), and
# each prints its top functions.
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

# The other ISAs: a short run each (qemu-user emulates every traced call).
for isa in arm64 riscv64; do
  prog=$BUILD/demo/$isa/ftjit-demo-service
  if [ ! -x "$prog" ]; then
    echo "demo: no $prog (its cross compiler was missing when $BUILD was configured: run scripts/setup.sh)" >&2
    exit 1
  fi
  echo "== ftjit run on the $isa build of the service (under qemu-user): counting demo_* calls"
  "$BUILD/cli/ftjit" run --plugin count:top=5 --filter 'demo_*' -- "$prog" 0.02
done
