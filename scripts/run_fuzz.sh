#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the fuzzers with clang++ and runs each for a bounded time; fails on
# any crash: the ELF parser (FUZZ_SECONDS) and the plugin spec and option
# parsers (FUZZ_SPEC_SECONDS).
#
# usage: scripts/run_fuzz.sh [build-dir (default build/fuzz)] [seed dir, e.g. build/tests/fixtures]
# and the agent's control-message decoders with the argument capture they
# carry (FUZZ_CONTROL_SECONDS), and the DWARF reader (FUZZ_DWARF_SECONDS).
# env:   FUZZ_SECONDS (default 60), FUZZ_SPEC_SECONDS (default 20),
#        FUZZ_CONTROL_SECONDS (default 30), FUZZ_DWARF_SECONDS (default 30),
#        FUZZ_JOBS (parallel workers, default 1),
#        CLANGXX (default: clang++, else clang++-14)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/fuzz}
seeds=${2:-}
seconds=${FUZZ_SECONDS:-60}
spec_seconds=${FUZZ_SPEC_SECONDS:-20}
control_seconds=${FUZZ_CONTROL_SECONDS:-30}
dwarf_seconds=${FUZZ_DWARF_SECONDS:-30}
jobs=${FUZZ_JOBS:-1}

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

mkdir -p "$build/corpus" "$build/artifacts"
binary=$build/elf_fuzz
echo "building $binary with $cxx"
"$cxx" -std=c++20 -g -O1 -Wall -Wextra \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  -I"$root" -I"$root/include" \
  "$root/tests/fuzz/elf_fuzz.cpp" \
  "$root/core/elf_image.cpp" "$root/core/dwarf_producers.cpp" "$root/core/demangle.cpp" \
  "$root/core/site_discovery.cpp" "$root/core/sled_layout.cpp" "$root/core/sled_recovery.cpp" \
  "$root/core/error.cpp" "$root/core/site.cpp" "$root/core/eh_frame_index.cpp" "$root/core/ifunc_slots.cpp" \
  -ldw -lelf -o "$binary"

# Real linked files are the best seeds: the fuzzer starts from valid
# headers, tables and relocations and mutates from there.
if [[ -n $seeds ]]; then
  if [[ ! -d $seeds ]]; then
    echo "run_fuzz.sh: seed directory $seeds does not exist" >&2
    exit 2
  fi
  find "$seeds" -maxdepth 1 -type f -size -1024k -exec cp -f {} "$build/corpus/" \;
fi

echo "fuzzing for ${seconds}s ($jobs job(s)); crashes go to $build/artifacts/"
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
      -artifact_prefix="$build/artifacts/" -print_final_stats=1)
if (( jobs > 1 )); then
  args+=(-jobs="$jobs" -workers="$jobs")
fi
# libFuzzer exits non-zero on a crash, leak, timeout or OOM; set -e turns
# that into this script's failure.
"$binary" "${args[@]}" "$build/corpus"

# What users type after --plugin: small inputs, no seeds needed.
spec_binary=$build/plugin_spec_fuzz
mkdir -p "$build/spec_corpus"
echo "building $spec_binary with $cxx"
"$cxx" -std=c++20 -g -O1 -Wall -Wextra \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  -I"$root" -I"$root/include" -I"$root/plugins/include" \
  "$root/tests/fuzz/plugin_spec_fuzz.cpp" "$root/runtime/plugin_host/options.cpp" "$root/core/error.cpp" \
  -o "$spec_binary"
echo "fuzzing the plugin spec parser for ${spec_seconds}s"
"$spec_binary" -max_total_time="$spec_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$build/spec_corpus"

# What reaches the agent's socket: hostile frames must be refused.
control_binary=$build/control_fuzz
mkdir -p "$build/control_corpus"
echo "building $control_binary with $cxx"
"$cxx" -std=c++20 -g -O1 -Wall -Wextra \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  -I"$root" -I"$root/include" -I"$root/plugins/include" \
  "$root/tests/fuzz/control_fuzz.cpp" "$root/runtime/control/messages.cpp" \
  "$root/runtime/control/wire.cpp" "$root/core/error.cpp" \
  "$root/runtime/plugin_host/arg_capture.cpp" "$root/runtime/plugin_host/arg_capture_event.cpp" \
  -o "$control_binary"
echo "fuzzing the control-message decoders for ${control_seconds}s"
"$control_binary" -max_total_time="$control_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$build/control_corpus"

# The DWARF reader (core/dwarf_signatures.h, over libdw), on the fixtures
# its tests build with GCC and clang for every ISA.
dwarf_binary=$build/dwarf_fuzz
mkdir -p "$build/dwarf_corpus"
echo "building $dwarf_binary with $cxx"
"$cxx" -std=c++20 -g -O1 -Wall -Wextra \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
  -I"$root" -I"$root/include" \
  "$root/tests/fuzz/dwarf_fuzz.cpp" "$root/core/dwarf_signatures.cpp" "$root/core/error.cpp" \
  -ldw -lelf -o "$dwarf_binary"
if [[ -n $seeds && -d $seeds/../dwarf_signatures ]]; then
  find "$seeds/../dwarf_signatures" -maxdepth 1 -type f -size -256k -exec cp -f {} "$build/dwarf_corpus/" \;
fi
echo "fuzzing the DWARF reader for ${dwarf_seconds}s"
"$dwarf_binary" -max_total_time="$dwarf_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$build/dwarf_corpus"
