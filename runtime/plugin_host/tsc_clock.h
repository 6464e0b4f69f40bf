// SPDX-License-Identifier: MIT
// CLOCK_MONOTONIC, read through the ISA's cycle counter where the kernel
// itself trusts it (its clocksource is that counter: "tsc" on x86-64, see
// runtime/arch/arch.h; invariant and synchronised across CPUs). A trace
// takes two clock reads per call; through the vDSO one costs ~23 ns on the
// VM this was written on, rdtsc ~10 ns.
#pragma once

#include <cstdint>

namespace ftjit::plugins::detail {

// Calibrates once per process against CLOCK_MONOTONIC (about 10 ms, on
// the first session's start; not on the event path). Idempotent.
void calibrate_tsc_clock();

// CLOCK_MONOTONIC in ns: from the TSC once calibrated, else clock_gettime.
// Event path: no vector registers, no system call.
uint64_t monotonic_ns();

}  // namespace ftjit::plugins::detail
