/* SPDX-License-Identifier: MIT */
/* The functions every ISA's leg patches: one set per sled layout, compiled
 * from traced.c once per layout with TRACED_PREFIX set. The layouts are the
 * ISA's list (tests/<isa>/CMakeLists.txt, ftjit_isa_layout), which the
 * build writes into traced_layouts.h as an X-macro:
 *   FTJIT_TRACED_LAYOUTS(X): X(name, symbol prefix, pad bytes, has literal)
 * Each result depends on every argument and its position, so a register a
 * trampoline lost or swapped shows. */
#ifndef FTJIT_TESTS_COMMON_TRACED_H
#define FTJIT_TESTS_COMMON_TRACED_H

#include <stdint.h>

#include "traced_layouts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How each comes back is the ABI's: */
typedef struct traced_pair { int64_t lo, hi; } traced_pair;         /* two integer registers */
typedef struct traced_fpair { double a, b; } traced_fpair;          /* two FP registers */
typedef struct traced_hfa4 { double a, b, c, d; } traced_hfa4;      /* v0-v3 on arm64, memory on riscv64 */
typedef struct traced_big { int64_t v[5]; } traced_big;             /* memory, its address in x8 / a0 */

#define TRACED_DECLARE(P)                                                       \
  int64_t P##_sum8(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,      \
                   int64_t f, int64_t g, int64_t h);                           \
  double P##_fsum8(double a, double b, double c, double d, double e, double f, \
                   double g, double h);                                        \
  traced_big P##_big(int64_t seed);                                            \
  traced_pair P##_pair(int64_t seed);                                          \
  traced_fpair P##_fpair(double seed);                                         \
  traced_hfa4 P##_hfa4(double seed);                                           \
  int64_t P##_leaf(int64_t x);
#define TRACED_DECLARE_LAYOUT(name, prefix, pad, literal) TRACED_DECLARE(prefix)
FTJIT_TRACED_LAYOUTS(TRACED_DECLARE_LAYOUT)

#ifdef __cplusplus
}
#endif
#endif
