// SPDX-License-Identifier: MIT
// What ftjit-bench says and reads that depends on the ISA, x86-64 (the
// other ISAs: bench/<isa>/bench_isa.h, found through the include path that
// bench/CMakeLists.txt sets for FTJIT_ARCH).
#pragma once

#include <x86intrin.h>

#include <cstdint>

namespace ftjit_bench::isa {

inline constexpr const char *kIsaName = "x86-64";

// The cycle counter the host clock reads once calibrated (clocks rows).
inline constexpr const char *kCycleCounterName = "rdtsc";
inline std::uint64_t read_cycle_counter() { return __rdtsc(); }
// How the clocks note names it: "... CLOCK_MONOTONIC from <this> ...".
inline constexpr const char *kCycleCounterSource = "the TSC when the kernel's clocksource is tsc";

// calls' note on the direct rows: where the trampolines are and what the
// c_call and abi ones keep.
inline constexpr const char *kDirectTrampFile = "bench/x86_64/direct_tramp.S";
inline constexpr const char *kCCallKeeps = "rdi";
inline constexpr const char *kAbiKeeps = "every argument register and r11";

}  // namespace ftjit_bench::isa
