/* SPDX-License-Identifier: MIT */
/* Functions the aarch64 trampoline harness patches: one set per layout
 * (TRACED_PREFIX names it), compiled from traced_a64.c three times:
 * =4,2 (literal), =2 (no literal), =4,2 with a bti landing pad. */
#ifndef FTJIT_TESTS_ARM64_TRACED_A64_H
#define FTJIT_TESTS_ARM64_TRACED_A64_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct a64_pair { int64_t lo, hi; } a64_pair;          /* x0, x1 */
typedef struct a64_hfa4 { double a, b, c, d; } a64_hfa4;       /* v0-v3 */
typedef struct a64_big { int64_t v[5]; } a64_big;              /* via x8 */

#define A64_DECLARE_TRACED(P)                                                   \
  int64_t P##_sum8(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,      \
                   int64_t f, int64_t g, int64_t h);                           \
  double P##_fsum8(double a, double b, double c, double d, double e, double f, \
                   double g, double h);                                        \
  a64_big P##_big(int64_t seed);                                               \
  a64_pair P##_pair(int64_t seed);                                             \
  a64_hfa4 P##_hfa4(double seed);                                              \
  int64_t P##_leaf(int64_t x);

A64_DECLARE_TRACED(a64_slot)
A64_DECLARE_TRACED(a64_noslot)
A64_DECLARE_TRACED(a64_bti)

#ifdef __cplusplus
}
#endif
#endif
