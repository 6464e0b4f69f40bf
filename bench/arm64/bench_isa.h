// SPDX-License-Identifier: MIT
// What ftjit-bench says and reads that depends on the ISA, arm64 (see
// bench/x86_64/bench_isa.h).
#pragma once

#include <cstdint>

namespace ftjit_bench::isa {

inline constexpr const char *kIsaName = "arm64";

// The cycle counter the host clock reads once calibrated (clocks rows):
// the virtual counter, read as runtime/arch/arm64/arch_isa.h reads it (the
// isb keeps the read from being taken early).
inline constexpr const char *kCycleCounterName = "cntvct_el0";
inline std::uint64_t read_cycle_counter() {
  std::uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}
// How the clocks note names it: "... CLOCK_MONOTONIC from <this> ...".
inline constexpr const char *kCycleCounterSource =
    "cntvct_el0 when the kernel's clocksource is arch_sys_counter";

// calls' note on the direct rows: where the trampolines are and what the
// c_call and abi ones keep.
inline constexpr const char *kDirectTrampFile = "bench/arm64/direct_tramp.S";
inline constexpr const char *kCCallKeeps = "x0 (and x9, x30 for the way back)";
inline constexpr const char *kAbiKeeps = "x0-x8, x10-x15 and x18";

}  // namespace ftjit_bench::isa
