#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A cross leg: cross-builds the guest side of ftjit for one ISA with
# Debian's cross toolchain (cmake/toolchains/<triple>.cmake) and runs its
# tests as guest code under qemu-user (ctest's emulator): core/, backends/,
# runtime/ (the engine, the agent, the plugin host), the plugins, the ptrace
# injector where the ISA has one, and tests/<isa> (FTJIT_CROSS_LEG).
# riscv64 has no code generator of its own: the host build's ftjit
# (FTJIT_HOST_CLI) assembles its trampolines with LLVM MC; for arm64 the
# host ftjit only adds the tests of `ftjit run` on arm64 programs.
# Packages: scripts/setup.sh.
#
#   scripts/build_cross.sh arm64|riscv64 [--build-only|--runtime-only] [BUILD_DIR]
#     BUILD_DIR       default build-aarch64 (arm64), build-riscv64 (riscv64)
#     --build-only    build everything, leave the tests to the caller
#                     (scripts/test.sh runs them with its ctest)
#     --runtime-only  build only what `ftjit run` brings to a program of the
#                     ISA (the agent and the built-in plugins), no tests
#                     (scripts/setup.sh); a later full build of the same
#                     BUILD_DIR reuses its objects, the configuration being
#                     the same
#   JOBS=N            the build's parallelism (default 2)
#   FTJIT_HOST_CLI    the host build's ftjit (default build/cli/ftjit)
#
# The agent and plugins are then linked into the host build beside its
# ftjit, as an installed prefix lays them out (lib/ftjit/<isa>/,
# lib/ftjit/<isa>/plugins/), where `ftjit run` finds them with no variable
# set and `cmake --install` of the host build copies them from.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/build_cross.sh arm64|riscv64 [--build-only|--runtime-only] [BUILD_DIR]" >&2
  exit 2
}
ISA=${1:-}
case "$ISA" in
  arm64) TRIPLE=aarch64-linux-gnu QEMU=qemu-aarch64 LABEL=aarch64 ;;
  riscv64) TRIPLE=riscv64-linux-gnu QEMU=qemu-riscv64 LABEL=riscv64 ;;
  *) usage ;;
esac
shift
MODE=all
case "${1:-}" in
  --build-only) MODE=build; shift ;;
  --runtime-only) MODE=runtime; shift ;;
  -*) usage ;;
esac
BUILD=${1:-build-$LABEL}
JOBS=${JOBS:-2}
HOST_CLI=${FTJIT_HOST_CLI:-$PWD/build/cli/ftjit}
for tool in "$TRIPLE-g++" "$QEMU"; do
  command -v "$tool" >/dev/null || { echo "build_cross: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done
if [ ! -x "$HOST_CLI" ]; then
  # arm64 builds without it (its tests of `ftjit run` are then not registered).
  [ "$ISA" = arm64 ] || { echo "build_cross: no host ftjit at $HOST_CLI: build the host first (scripts/setup.sh)" >&2; exit 1; }
  HOST_CLI=""
fi

start=$(date +%s)
echo "== configuring $BUILD ($ISA leg)"
# The same arguments in every mode: a runtime-only build and the full one
# after it then share one configuration and its objects.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$TRIPLE.cmake" \
  -DFTJIT_CROSS_LEG=ON -DFTJIT_HOST_CLI="$HOST_CLI" >/dev/null
if [ "$MODE" = runtime ]; then
  plugins=$(cmake --build "$BUILD" --target help | grep -oE 'ftjit-plugin-[A-Za-z0-9_]+' | sort -u)
  [ -n "$plugins" ] || { echo "build_cross: no ftjit-plugin-* target in $BUILD" >&2; exit 1; }
  echo "== building the agent and plugins:" $plugins
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j"$JOBS" --target ftjit_agent $plugins
else
  echo "== building"
  cmake --build "$BUILD" -j"$JOBS"
fi
built=$(date +%s)

if [ -n "$HOST_CLI" ]; then
  # Links, not copies: a rebuild of this tree is what the host's ftjit runs.
  stage=$(dirname "$HOST_CLI")/../lib/ftjit/$ISA
  mkdir -p "$stage/plugins"
  rm -f "$stage"/plugins/ftjit-plugin-*.so
  ln -sfr "$BUILD/lib/libftjit-agent.so" "$stage/libftjit-agent.so"
  for plugin in "$BUILD"/plugins/lib/ftjit-plugin-*.so; do
    ln -sfr "$plugin" "$stage/plugins/"
  done
  echo "== $ISA agent and plugins linked into $(realpath "$stage")"
fi

if [ "$MODE" != all ]; then
  echo "== $ISA leg built in $((built - start)) s"
  exit 0
fi
echo "== testing under $QEMU"
ctest --test-dir "$BUILD" -L "$LABEL" --output-on-failure
end=$(date +%s)
echo "== $ISA leg: configure+build $((built - start)) s, tests $((end - built)) s"
