/* SPDX-License-Identifier: MIT */
/* Traced functions of ftjit-bench: the leaf the calls section times, its no-sled
 * twin, and 200 functions the "irrelevant" tracers attach to.
 *
 * Built with -O2 -fpatchable-function-entry=13,8 -falign-functions=16 on
 * x86-64, =4,2 (arm64) or =8,4 (riscv64) -falign-functions=8 (see
 * bench/CMakeLists.txt); it is
 * the only file of ftjit-bench with sleds, so the engine's own code and the
 * bench driver are never traced. */
#include "bench_target.h"

/* noinline + noipa (GCC only): the bench calls through a volatile pointer
 * anyway, but this also keeps GCC from cloning or specialising the body, so
 * the timed function is exactly one sled + a few instructions + ret. */
#if defined(__clang__)
#define BENCH_LEAF_ATTRS __attribute__((noinline, used))
#else
#define BENCH_LEAF_ATTRS __attribute__((noinline, noipa, used))
#endif

BENCH_LEAF_ATTRS int bench_leaf(int x) { return x * 3 + 1; }

BENCH_LEAF_ATTRS long bench_args4(long a, long b, long c, long d) { return a * 3 + b - c + d; }
BENCH_LEAF_ATTRS __attribute__((patchable_function_entry(0, 0)))
int bench_args4_caller(int x) { return (int)bench_args4(x, x + 1, x + 2, x + 3); }
/* bench_args4's twin (one instruction differs, so that nothing folds the
 * two): the paired --args measurement traces both at once, the twin
 * without capture, and alternates between them. */
BENCH_LEAF_ATTRS long bench_args4_twin(long a, long b, long c, long d) { return a * 3 + b - c - d; }
BENCH_LEAF_ATTRS __attribute__((patchable_function_entry(0, 0)))
int bench_args4_twin_caller(int x) { return (int)bench_args4_twin(x, x + 1, x + 2, x + 3); }

/* patchable_function_entry(0,0) opts out of the global flag: no NOPs, no
 * __patchable_function_entries record. Same body as bench_leaf, so the
 * difference between the two is the cost of the (disabled) sled itself. */
BENCH_LEAF_ATTRS __attribute__((patchable_function_entry(0, 0)))
int bench_leaf_untraced(int x) { return x * 3 + 1; }

/* 200 distinct functions; distinct constants so no two bodies are equal and
 * nothing can fold them together. Only the writer section calls them:
 * elsewhere tracers attached to them are "irrelevant" to bench_leaf. */
/* The relocated section's pair: one body, with a sled and without. The
 * register the body claims to use gives it a prologue to relocate, as
 * every real function has (bench_leaf's two instructions are too short:
 * its ret would be among the bytes the branch overwrites). */
#if defined(__x86_64__)
#define BENCH_SAVED "rbx"
#elif defined(__aarch64__)
#define BENCH_SAVED "x19"
#else
#define BENCH_SAVED "s1"
#endif
BENCH_LEAF_ATTRS int bench_body_sled(int x) {
  __asm__ volatile("" ::: BENCH_SAVED);
  return x * 3 + 1;
}
BENCH_LEAF_ATTRS __attribute__((patchable_function_entry(0, 0))) int bench_body_relocated(int x) {
  __asm__ volatile("" ::: BENCH_SAVED);
  return x * 3 + 1;
}

#define BENCH_OTHER(k) \
  BENCH_LEAF_ATTRS int bench_other_##k(int x) { return x + k; }
#define BENCH_OTHER10(t)                                             \
  BENCH_OTHER(t##0) BENCH_OTHER(t##1) BENCH_OTHER(t##2)              \
  BENCH_OTHER(t##3) BENCH_OTHER(t##4) BENCH_OTHER(t##5)              \
  BENCH_OTHER(t##6) BENCH_OTHER(t##7) BENCH_OTHER(t##8) BENCH_OTHER(t##9)

BENCH_OTHER10()
BENCH_OTHER10(1)
BENCH_OTHER10(2)
BENCH_OTHER10(3)
BENCH_OTHER10(4)
BENCH_OTHER10(5)
BENCH_OTHER10(6)
BENCH_OTHER10(7)
BENCH_OTHER10(8)
BENCH_OTHER10(9)
BENCH_OTHER10(10)
BENCH_OTHER10(11)
BENCH_OTHER10(12)
BENCH_OTHER10(13)
BENCH_OTHER10(14)
BENCH_OTHER10(15)
BENCH_OTHER10(16)
BENCH_OTHER10(17)
BENCH_OTHER10(18)
BENCH_OTHER10(19)

/* The same 200, callable: the writer section calls them in turn, so that
 * its trace names many functions, as a program's does. */
#define BENCH_OTHER_PTR(k) bench_other_##k,
#define BENCH_OTHER_PTR10(t)                                                  \
  BENCH_OTHER_PTR(t##0) BENCH_OTHER_PTR(t##1) BENCH_OTHER_PTR(t##2)           \
  BENCH_OTHER_PTR(t##3) BENCH_OTHER_PTR(t##4) BENCH_OTHER_PTR(t##5)           \
  BENCH_OTHER_PTR(t##6) BENCH_OTHER_PTR(t##7) BENCH_OTHER_PTR(t##8) BENCH_OTHER_PTR(t##9)
int (*const bench_others[BENCH_OTHER_COUNT])(int) = {
    BENCH_OTHER_PTR10() BENCH_OTHER_PTR10(1) BENCH_OTHER_PTR10(2) BENCH_OTHER_PTR10(3)
    BENCH_OTHER_PTR10(4) BENCH_OTHER_PTR10(5) BENCH_OTHER_PTR10(6) BENCH_OTHER_PTR10(7)
    BENCH_OTHER_PTR10(8) BENCH_OTHER_PTR10(9) BENCH_OTHER_PTR10(10) BENCH_OTHER_PTR10(11)
    BENCH_OTHER_PTR10(12) BENCH_OTHER_PTR10(13) BENCH_OTHER_PTR10(14) BENCH_OTHER_PTR10(15)
    BENCH_OTHER_PTR10(16) BENCH_OTHER_PTR10(17) BENCH_OTHER_PTR10(18) BENCH_OTHER_PTR10(19)};

/* Static assertion that the list above matches BENCH_OTHER_COUNT. */
typedef char bench_other_count_check[(BENCH_OTHER_COUNT == 200) ? 1 : -1];
