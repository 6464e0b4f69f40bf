/* SPDX-License-Identifier: MIT */
/* Functions the riscv64 engine tests patch: one set per layout
 * (TRACED_PREFIX names it), compiled from traced_rv64.c twice:
 * =8,4 with the C extension (c.nop sleds) and =4,2 without (nop sleds). */
#ifndef FTJIT_TESTS_RISCV64_TRACED_RV64_H
#define FTJIT_TESTS_RISCV64_TRACED_RV64_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rv_pair { int64_t lo, hi; } rv_pair;      /* a0, a1 */
typedef struct rv_fpair { double a, b; } rv_fpair;       /* fa0, fa1 */
typedef struct rv_big { int64_t v[5]; } rv_big;          /* in memory, its address in a0 */

#define RV_DECLARE_TRACED(P)                                                    \
  int64_t P##_sum8(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,      \
                   int64_t f, int64_t g, int64_t h);                           \
  double P##_fsum8(double a, double b, double c, double d, double e, double f, \
                   double g, double h);                                        \
  rv_big P##_big(int64_t seed);                                                \
  rv_pair P##_pair(int64_t seed);                                              \
  rv_fpair P##_fpair(double seed);                                             \
  int64_t P##_leaf(int64_t x);

RV_DECLARE_TRACED(rv_c)
RV_DECLARE_TRACED(rv_g)

#ifdef __cplusplus
}
#endif
#endif
