// SPDX-License-Identifier: MIT
// Declarations of the caller-supplied direct trampolines in
// bench/<isa>/direct_tramp.S (x86_64, arm64, riscv64: the same contracts).
#pragma once

#include <cstdint>

#include "ftjit/ftjit.h"

extern "C" {
// Bumps ftjit_bench_direct_hits and returns; preserves every argument register.
void ftjit_bench_direct_tramp();
// Bumps ftjit_bench_direct_irrelevant_hits and returns.
void ftjit_bench_direct_tramp_irrelevant();
// Calls ftjit_bench_count_direct_hit (C) and returns: the floor of any
// trampoline that calls C. Keeps only what bench_leaf needs (rdi; x0).
void ftjit_bench_direct_tramp_c();
void ftjit_bench_count_direct_hit();
// Does what every ftjit trampoline must for ftjit_func_t (every argument
// register and what an -fipa-ra caller may keep: r11; x10-x15 and x18 on
// arm64; ftjit_regs filled) and calls the bench's counting
// callback with ftjit_bench_abi_ops; no reentrancy guard, no grace counts.
void ftjit_bench_direct_tramp_abi();
// Counts into ftjit_bench_direct_hits.
extern ftjit_ops* ftjit_bench_abi_ops;

// Plain (not atomic) counters: written only by the one calling thread.
extern std::uint64_t ftjit_bench_direct_hits;
extern std::uint64_t ftjit_bench_direct_irrelevant_hits;
}
