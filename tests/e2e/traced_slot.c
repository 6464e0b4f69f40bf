// SPDX-License-Identifier: MIT
// Traced functions with an ops slot (-fpatchable-function-entry=13,8).
#include "traced.h"

__attribute__((noinline)) int traced_add(int a, int b) { return a + b; }

__attribute__((noinline)) long traced_six(long a, long b, long c, long d, long e, long f) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}

__attribute__((noinline)) double traced_fp(double x, double y) { return x * y + 0.5; }

// Recurses through a volatile pointer so the compiler cannot turn the
// recursion into a loop.
int (*volatile traced_recurse_self)(int) = traced_recurse;
__attribute__((noinline)) int traced_recurse(int n) {
  return n <= 0 ? 0 : 1 + traced_recurse_self(n - 1);
}

__attribute__((noinline)) void traced_throw_through(int v, void (*thrower)(int)) { thrower(v); }

#define MANY_FN(i) \
  __attribute__((noinline)) static int traced_many_##i(int x) { return x + i; }
#define TEN(p) MANY_FN(p##0) MANY_FN(p##1) MANY_FN(p##2) MANY_FN(p##3) MANY_FN(p##4) \
               MANY_FN(p##5) MANY_FN(p##6) MANY_FN(p##7) MANY_FN(p##8) MANY_FN(p##9)
#define HUNDRED(p) TEN(p##0) TEN(p##1) TEN(p##2) TEN(p##3) TEN(p##4) \
                   TEN(p##5) TEN(p##6) TEN(p##7) TEN(p##8) TEN(p##9)
HUNDRED(1) HUNDRED(2) HUNDRED(3) HUNDRED(4) HUNDRED(5)
HUNDRED(6) HUNDRED(7) HUNDRED(8) HUNDRED(9) HUNDRED(10)

#define REF(i) traced_many_##i,
#define TEN_REF(p) REF(p##0) REF(p##1) REF(p##2) REF(p##3) REF(p##4) \
                   REF(p##5) REF(p##6) REF(p##7) REF(p##8) REF(p##9)
#define HUNDRED_REF(p) TEN_REF(p##0) TEN_REF(p##1) TEN_REF(p##2) TEN_REF(p##3) TEN_REF(p##4) \
                       TEN_REF(p##5) TEN_REF(p##6) TEN_REF(p##7) TEN_REF(p##8) TEN_REF(p##9)
int (*const traced_many[TRACED_MANY])(int) = {
    HUNDRED_REF(1) HUNDRED_REF(2) HUNDRED_REF(3) HUNDRED_REF(4) HUNDRED_REF(5)
    HUNDRED_REF(6) HUNDRED_REF(7) HUNDRED_REF(8) HUNDRED_REF(9) HUNDRED_REF(10)};

// Ends in a tail call (jmp) to traced_add through a volatile pointer: the
// callee runs with this function's return address, which an exit hook of
// this function has already replaced.
int (*volatile traced_tail_target)(int, int) = traced_add;
__attribute__((noinline)) int traced_tail(int a, int b) { return traced_tail_target(a, b); }
