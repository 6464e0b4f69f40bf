// SPDX-License-Identifier: MIT
// The ISA's cycle counter (runtime/arch/arch.h) as a clock, calibrated once
// per process against CLOCK_MONOTONIC (about 10 ms; never on the event
// path). Two users:
//  - the plugin host's now_ns: CLOCK_MONOTONIC read through the counter
//    where the kernel itself trusts it (its clocksource is that counter:
//    invariant and synchronised across CPUs). A trace takes two clock reads
//    per call; through the vDSO one costs ~23 ns on the VM this was written
//    on, rdtsc ~10 ns;
//  - inline latency (ftjit.h, FTJIT_INLINE_LATENCY): durations as counter
//    deltas scaled to ns by `mult`, which the exit landing reads from
//    memory (cycle_ns_mult()).
#pragma once

#include <cstdint>

namespace ftjit {

// Idempotent; thread-safe. The first call may sleep: its window runs
// from the library's load, topped up to 10 ms.
void calibrate_cycle_clock();

// Whether monotonic_ns() reads the counter once calibrated (the kernel's
// clocksource is the counter). Where it does not, calibrating changes
// nothing it answers, and a session need not wait for it.
bool cycle_counter_is_clock();

// Whether counter deltas would measure durations (as cycle_deltas_trusted
// will say), known without calibrating: a user of deltas where they are
// not durations falls back without waiting for a calibration.
bool cycle_deltas_trustworthy();

// CLOCK_MONOTONIC in ns: from the counter once calibrated, where the
// kernel's clocksource is the counter; else clock_gettime.
// Event path: no vector registers, no system call.
uint64_t monotonic_ns();

// Whether counter deltas measure durations on this machine (after
// calibrate_cycle_clock): the kernel's clocksource is the counter, or the
// ISA defines it as constant-rate and common to every CPU (arm64's
// generic timer, riscv64's time CSR; also under qemu-user, which reads it
// from the host's clock).
bool cycle_deltas_trusted();

// ns per tick in 32.32 fixed point (0 before calibration): ns = (ticks *
// mult) >> 32, the product in 128 bits. Its address is what generated code
// reads; the next word holds it in 16.16, for a 64-bit product (exact to
// 2^-16 relative, enough for ticks below 2^48: the code checks overflow).
const uint64_t* cycle_ns_mult();
uint64_t cycles_to_ns(uint64_t ticks);

}  // namespace ftjit
