// SPDX-License-Identifier: MIT
// Functions the e2e tests trace. traced_slot.c is built with
// -fpatchable-function-entry=13,8 (ops slot), traced_noslot.c with =5; both by
// GCC, so their sleds are one-byte NOPs that need the one-time init.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRACED_MANY 1000

// =13,8
int traced_add(int a, int b);
long traced_six(long a, long b, long c, long d, long e, long f);
double traced_fp(double x, double y);
int traced_recurse(int n);
void traced_throw_through(int v, void (*thrower)(int));
int traced_tail(int a, int b);  // tail-calls traced_add
extern int (*const traced_many[TRACED_MANY])(int);

// =5
int traced_noslot_mul(int a, int b);

// Not patchable (no flag).
int untraced_function(int a);

#ifdef __cplusplus
}
#endif
