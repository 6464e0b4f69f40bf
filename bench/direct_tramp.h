// SPDX-License-Identifier: MIT
// Declarations of the caller-supplied direct trampolines in direct_tramp.S.
#pragma once

#include <cstdint>

extern "C" {
// Bumps ftjit_bench_direct_hits and returns; preserves every argument register.
void ftjit_bench_direct_tramp();
// Bumps ftjit_bench_direct_irrelevant_hits and returns.
void ftjit_bench_direct_tramp_irrelevant();
// Calls ftjit_bench_count_direct_hit (C) and returns: the floor of any
// trampoline that calls C. Keeps only rdi, all bench_leaf needs.
void ftjit_bench_direct_tramp_c();
void ftjit_bench_count_direct_hit();

// Plain (not atomic) counters: written only by the one calling thread.
extern std::uint64_t ftjit_bench_direct_hits;
extern std::uint64_t ftjit_bench_direct_irrelevant_hits;
}
