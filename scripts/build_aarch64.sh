#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The arm64 leg: cross-builds core/, backends/, the engine library of
# runtime/, the ptrace injector and tests/arm64 with Debian's
# aarch64-linux-gnu toolchain (cmake/toolchains/aarch64-linux-gnu.cmake) and
# runs the tests as arm64 code under qemu-aarch64 (ctest's emulator): the
# code generator and its differential check, discovery on the arm64
# fixtures (aarch64-linux-gnu-g++ and clang-16), the engine with every
# strategy, the stress test and the exit-hook programs (FTJIT_CROSS_LEG).
# Packages: scripts/setup.sh.
#
#   scripts/build_aarch64.sh [--build-only] [BUILD_DIR]   (default: build-aarch64)
#   JOBS=N to change the build's parallelism (default 2). FTJIT_HOST_CLI=
#   the host build's ftjit adds the tests of `ftjit run` on arm64 programs. --build-only
#   leaves the tests to the caller (scripts/test.sh runs them with its ctest).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_ONLY=0
if [ "${1:-}" = "--build-only" ]; then
  BUILD_ONLY=1
  shift
fi
BUILD=${1:-build-aarch64}
JOBS=${JOBS:-2}
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "build_aarch64: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done

start=$(date +%s)
echo "== configuring $BUILD (arm64 leg)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DFTJIT_CROSS_LEG=ON -DFTJIT_HOST_CLI="${FTJIT_HOST_CLI:-}" >/dev/null
echo "== building"
cmake --build "$BUILD" -j"$JOBS"
built=$(date +%s)
if [ "$BUILD_ONLY" -eq 1 ]; then
  echo "== arm64 leg built in $((built - start)) s"
  exit 0
fi
echo "== testing under qemu-aarch64"
ctest --test-dir "$BUILD" -L aarch64 --output-on-failure
end=$(date +%s)
echo "== arm64 leg: configure+build $((built - start)) s, tests $((end - built)) s"
