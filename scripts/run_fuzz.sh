#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the fuzzers with clang++ and runs each for a bounded time; fails on
# any crash: the ELF parser (FUZZ_SECONDS), the plugin spec and option
# parsers (FUZZ_SPEC_SECONDS), the agent's control-message decoders with the
# argument capture they carry (FUZZ_CONTROL_SECONDS), and the DWARF reader
# (FUZZ_DWARF_SECONDS).
#
# Each fuzzer is one process on one core: the four are built at once, then
# run in two lanes side by side (the ELF parser and the spec parser in one,
# the control messages and the DWARF reader in the other), so that on 2
# cores the whole takes the longer lane's time, not the sum. A lane's output
# is held back and printed when the lanes are done.
#
# usage: scripts/run_fuzz.sh [build-dir (default build/fuzz)] [seed dir, e.g. build/tests/fixtures]
# env:   FUZZ_SECONDS (default 60), FUZZ_SPEC_SECONDS (default 20),
#        FUZZ_CONTROL_SECONDS (default 30), FUZZ_DWARF_SECONDS (default 30),
#        CLANGXX (default: clang++, else clang++-16 .. clang++-14)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/fuzz}
seeds=${2:-}
seconds=${FUZZ_SECONDS:-60}
spec_seconds=${FUZZ_SPEC_SECONDS:-20}
control_seconds=${FUZZ_CONTROL_SECONDS:-30}
dwarf_seconds=${FUZZ_DWARF_SECONDS:-30}

cxx=${CLANGXX:-}
if [[ -z $cxx ]]; then
  for candidate in clang++ clang++-16 clang++-15 clang++-14; do
    if command -v "$candidate" >/dev/null; then cxx=$candidate; break; fi
  done
fi
if [[ -z $cxx ]]; then
  echo "run_fuzz.sh: clang++ not found (libFuzzer needs clang)" >&2
  exit 2
fi
if [[ -n $seeds && ! -d $seeds ]]; then
  echo "run_fuzz.sh: seed directory $seeds does not exist" >&2
  exit 2
fi
mkdir -p "$build/artifacts"

build_fuzzer() {  # name, then sources and libraries (paths under the root)
  local name=$1
  shift
  local inputs=()
  for x in "$@"; do
    case $x in -l*) inputs+=("$x") ;; *) inputs+=("$root/$x") ;; esac
  done
  "$cxx" -std=c++20 -g -O1 -Wall -Wextra \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    -I"$root" -I"$root/include" -I"$root/plugins/include" \
    "${inputs[@]}" -o "$build/$name"
}

# libFuzzer exits non-zero on a crash, leak, timeout or OOM.
run_fuzzer() {  # name, corpus, seconds, max_len, what
  local name=$1 corpus=$2 secs=$3 max_len=$4 what=$5
  mkdir -p "$build/$corpus"
  echo "fuzzing $what for ${secs}s; crashes go to $build/artifacts/"
  "$build/$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$build/$corpus"
}

echo "building the fuzzers in $build with $cxx"
pids=()
build_fuzzer elf_fuzz tests/fuzz/elf_fuzz.cpp \
  core/elf_image.cpp core/dwarf_producers.cpp core/demangle.cpp \
  core/site_discovery.cpp core/sled_layout.cpp core/sled_recovery.cpp \
  core/error.cpp core/site.cpp core/eh_frame_index.cpp core/ifunc_slots.cpp core/bulk_memory.cpp -ldw -lelf &
pids+=($!)
# What users type after --plugin.
build_fuzzer plugin_spec_fuzz tests/fuzz/plugin_spec_fuzz.cpp \
  runtime/plugin_host/options.cpp core/error.cpp &
pids+=($!)
# What reaches the agent's socket: hostile frames must be refused.
build_fuzzer control_fuzz tests/fuzz/control_fuzz.cpp runtime/control/messages.cpp \
  runtime/control/wire.cpp core/error.cpp \
  runtime/plugin_host/arg_capture.cpp runtime/plugin_host/arg_capture_event.cpp &
pids+=($!)
# The DWARF reader (core/dwarf_signatures.h, over libdw).
build_fuzzer dwarf_fuzz tests/fuzz/dwarf_fuzz.cpp core/dwarf_signatures.cpp core/error.cpp \
  -ldw -lelf &
pids+=($!)
built=0
for pid in "${pids[@]}"; do wait "$pid" || built=1; done
if (( built != 0 )); then
  echo "run_fuzz.sh: a fuzzer did not build" >&2
  exit 1
fi

# Real linked files are the best seeds: the fuzzer starts from valid
# headers, tables and relocations and mutates from there; the DWARF reader
# gets the fixtures its tests build with GCC and clang for every ISA.
mkdir -p "$build/corpus" "$build/dwarf_corpus"
if [[ -n $seeds ]]; then
  find "$seeds" -maxdepth 1 -type f -size -1024k -exec cp -f {} "$build/corpus/" \;
  if [[ -d $seeds/../dwarf_signatures ]]; then
    find "$seeds/../dwarf_signatures" -maxdepth 1 -type f -size -256k -exec cp -f {} "$build/dwarf_corpus/" \;
  fi
fi

lane_a() {
  run_fuzzer elf_fuzz corpus "$seconds" 65536 "the ELF parser" &&
    run_fuzzer plugin_spec_fuzz spec_corpus "$spec_seconds" 4096 "the plugin spec parser"
}
lane_b() {
  run_fuzzer control_fuzz control_corpus "$control_seconds" 65536 "the control-message decoders" &&
    run_fuzzer dwarf_fuzz dwarf_corpus "$dwarf_seconds" 65536 "the DWARF reader"
}
log_a=$(mktemp)
log_b=$(mktemp)
lane_a >"$log_a" 2>&1 &
pid_a=$!
lane_b >"$log_b" 2>&1 &
pid_b=$!
status=0
wait "$pid_a" || status=1
wait "$pid_b" || status=1
cat "$log_a" "$log_b"
rm -f "$log_a" "$log_b"
exit "$status"
