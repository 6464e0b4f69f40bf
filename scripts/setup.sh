#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# From a fresh Debian 12 machine to a running demo: installs what is missing
# (Debian packages), builds ftjit, cross-builds what `ftjit run` brings to
# arm64 and riscv64 programs (their agents and plugins, linked beside
# ftjit), and runs the bundled demo (scripts/demo.sh): `ftjit attach` counts
# the calls of a running multi-threaded program, then detaches, and the
# program finishes normally; then the same program built for arm64 and
# riscv64 runs under `ftjit run` (qemu-user).
#
#   scripts/setup.sh [--no-demo]     BUILD=DIR for another host build dir
set -euo pipefail
cd "$(dirname "$0")/.."

# llvm-16-dev: LLVM MC, the riscv64 backend's assembler (its static MC
# libraries; libzstd-dev for theirs). g++-riscv64-linux-gnu: the riscv64
# leg (scripts/build_cross.sh riscv64), its binutils the riscv64 backend's
# differential check. Debian 12 has no riscv64 packages (TOOLCHAIN.md Q8):
# googletest is built from libgtest-dev's sources, spdlog and fmt are used
# header-only.
# libclang-rt-16-dev: LLVM XRay's runtime, the bench's peer (bench/xray/).
# clang-16: the arm64 discovery fixtures' clang (issue 12 names 16;
# Debian 12's default clang is 14, which the x86-64 fixtures use).
# protobuf-compiler: the tests decode the trace plugin's Perfetto output
# with protoc, an oracle independent of our encoder.
# uftrace: the bench's peer for whole traced programs (bench/programs.cpp).
# libdw-dev: elfutils' DWARF reader, the CLI's source of traced functions'
# parameter types (--args; core/dwarf_signatures.h). libbz2-dev: its
# archive's, which the CLI links libdw's in with (cli/CMakeLists.txt).
# nlohmann-json3-dev: the JSON reader of `ftjit diff` (cli/report_file.cpp).
# libprotobuf-dev, zlib1g-dev: `--format pprof` of flame, encoded by
# libprotobuf (protoc compiles cli/proto/pprof_profile.proto) and gzipped
# by zlib, in the CLI only (cli/flame_pprof.cpp).
# lld: the linker of the host builds (CMakeLists.txt says why).
# python3: Debian's interpreter, the tests' drivers' (CMakeLists.txt prefers
# /usr/bin/python3 to a version manager's shim on PATH).
# chromium-headless-shell: a real browser (Chromium without its UI) that
# the tests load `flame --format svg`'s pictures in (tests/flame_time).
PACKAGES=(build-essential cmake python3 lld clang clang-16 libclang-rt-16-dev libasmjit-dev libspdlog-dev libcli11-dev
          libgtest-dev libgmock-dev llvm-16-dev libzstd-dev libclang-rt-14-dev libunwind-dev libdw-dev libbz2-dev
          protobuf-compiler libprotobuf-dev zlib1g-dev uftrace chromium-headless-shell nlohmann-json3-dev
          g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user
          g++-riscv64-linux-gnu binutils-riscv64-linux-gnu)
# The arm64 leg (scripts/build_cross.sh arm64): Debian's multiarch arm64 builds
# of the libraries the cross-built backend and its tests link, run under
# qemu-aarch64. binutils-aarch64-linux-gnu's objdump is the independent
# disassembler of the host-side aarch64 encoding test. libunwind-dev:arm64:
# the remote unwinder of the arm64 ptrace injector (cli/inject/arm64).
ARM64_PACKAGES=(libasmjit-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
                libunwind-dev:arm64)

missing=()
for p in "${PACKAGES[@]}" "${ARM64_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

scripts/fetch_arm64_kernel.sh  # the arm64 kernel leg's kernel, busybox and python3 (tests/kernel)
BUILD=${BUILD:-build}
echo "== building into $BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

# Every ISA after this command: the arm64 and riscv64 agents and built-in
# plugins, nothing else (no tests), linked into $BUILD/lib/ftjit/<isa>/
# where its ftjit finds them. scripts/test.sh's cross legs build the rest
# in the same trees.
for isa in arm64 riscv64; do
  FTJIT_HOST_CLI=$PWD/$BUILD/cli/ftjit JOBS=$(nproc) scripts/build_cross.sh "$isa" --runtime-only
done

if [ "${1:-}" != "--no-demo" ]; then
  echo "== running the demo"
  scripts/demo.sh "$BUILD"
fi
