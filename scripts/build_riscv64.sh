#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The riscv64 leg: cross-builds core/, the backends' site encodings,
# runtime/ (the engine, the agent, the plugin host), the plugins and
# tests/riscv64 with Debian's riscv64-linux-gnu toolchain
# (cmake/toolchains/riscv64-linux-gnu.cmake) and runs the tests as riscv64
# code under qemu-riscv64 (ctest's emulator). The guest has no code
# generator: the host build's ftjit (FTJIT_HOST_CLI, default build/cli/ftjit)
# assembles its trampolines with LLVM MC. Packages: scripts/setup.sh.
#
#   scripts/build_riscv64.sh [--build-only] [BUILD_DIR]   (default: build-riscv64)
#   JOBS=N to change the build's parallelism (default 2). --build-only
#   leaves the tests to the caller (scripts/test.sh runs them with its ctest).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
if [ "${1:-}" = "--build-only" ]; then
  BUILD_ONLY=1
  shift
fi
BUILD=${1:-build-riscv64}
JOBS=${JOBS:-2}
HOST_CLI=${FTJIT_HOST_CLI:-$PWD/build/cli/ftjit}
for tool in riscv64-linux-gnu-g++ qemu-riscv64; do
  command -v "$tool" >/dev/null || { echo "build_riscv64: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done
[ -x "$HOST_CLI" ] || { echo "build_riscv64: no host ftjit at $HOST_CLI: build the host first (scripts/setup.sh)" >&2; exit 1; }

start=$(date +%s)
echo "== configuring $BUILD (riscv64 leg)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/riscv64-linux-gnu.cmake" \
  -DFTJIT_CROSS_LEG=ON -DFTJIT_HOST_CLI="$HOST_CLI" >/dev/null
echo "== building"
cmake --build "$BUILD" -j"$JOBS"
built=$(date +%s)
if [ "$BUILD_ONLY" -eq 1 ]; then
  echo "== riscv64 leg built in $((built - start)) s"
  exit 0
fi
echo "== testing under qemu-riscv64"
ctest --test-dir "$BUILD" -L riscv64 --output-on-failure
end=$(date +%s)
echo "== riscv64 leg: configure+build $((built - start)) s, tests $((end - built)) s"
