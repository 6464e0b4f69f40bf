/* SPDX-License-Identifier: MIT */
/* The functions ftjit-bench traces, defined in bench_target.c (C linkage). */
#ifndef FTJIT_BENCH_BENCH_TARGET_H
#define FTJIT_BENCH_BENCH_TARGET_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of bench_other_<k> functions, k = 0 .. BENCH_OTHER_COUNT - 1. */
#define BENCH_OTHER_COUNT 200

/* The traced leaf: has a -fpatchable-function-entry sled (13,8 on x86-64,
 * 4,2 on arm64, 8,4 on riscv64). */
int bench_leaf(int x);
/* bench_other_0 .. bench_other_<BENCH_OTHER_COUNT - 1>, traced like bench_leaf. */
extern int (*const bench_others[BENCH_OTHER_COUNT])(int);
/* The same body with no sled at all: the "no ftjit compiled in" baseline. */
int bench_leaf_untraced(int x);
/* A traced function of four integer arguments (the --args row), and its
 * caller, which has no sled: the loop calls the caller. */
long bench_args4(long a, long b, long c, long d);
int bench_args4_caller(int x);
long bench_args4_twin(long a, long b, long c, long d);
int bench_args4_twin_caller(int x);
/* One body with a prologue, with a sled and without one: what the
 * relocated section traces at its sled and through a relocated entry. */
int bench_body_sled(int x);
int bench_body_relocated(int x);

#ifdef __cplusplus
}
#endif
#endif /* FTJIT_BENCH_BENCH_TARGET_H */
