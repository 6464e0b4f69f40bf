// SPDX-License-Identifier: MIT
// What ftjit-bench says and reads that depends on the ISA, riscv64 (see
// bench/x86_64/bench_isa.h).
#pragma once

#include <cstdint>

namespace ftjit_bench::isa {

inline constexpr const char *kIsaName = "riscv64";

// The cycle counter the host clock reads once calibrated (clocks rows):
// the time CSR, read as runtime/arch/riscv64/arch_isa.h reads it.
inline constexpr const char *kCycleCounterName = "rdtime";
inline std::uint64_t read_cycle_counter() {
  std::uint64_t v;
  asm volatile("rdtime %0" : "=r"(v) : : "memory");
  return v;
}
// How the clocks note names it: "... CLOCK_MONOTONIC from <this> ...".
inline constexpr const char *kCycleCounterSource =
    "rdtime when the kernel's clocksource is riscv_clocksource";

// calls' note on the direct rows: where the trampolines are and what the
// c_call and abi ones keep.
inline constexpr const char *kDirectTrampFile = "bench/riscv64/direct_tramp.S";
inline constexpr const char *kCCallKeeps = "a0 (and t0, ra for the way back)";
inline constexpr const char *kAbiKeeps = "a0-a7 and t2-t6";

}  // namespace ftjit_bench::isa
