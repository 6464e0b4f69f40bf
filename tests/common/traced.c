/* SPDX-License-Identifier: MIT */
/* The patched functions (traced.h); compiled once per layout with
 * TRACED_PREFIX set (tests/common/isa_tests.cmake). */
#include "traced.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(n) CAT(TRACED_PREFIX, n)

int64_t NAME(_sum8)(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f,
                    int64_t g, int64_t h) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

double NAME(_fsum8)(double a, double b, double c, double d, double e, double f, double g,
                    double h) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

traced_big NAME(_big)(int64_t seed) {
  traced_big r;
  for (int i = 0; i < 5; ++i) r.v[i] = seed * (i + 1);
  return r;
}

traced_pair NAME(_pair)(int64_t seed) {
  traced_pair r = {seed * 3, seed * 5 + 1};
  return r;
}

traced_fpair NAME(_fpair)(double seed) {
  traced_fpair r = {seed + 0.5, seed * 2.0};
  return r;
}

traced_hfa4 NAME(_hfa4)(double seed) {
  traced_hfa4 r = {seed + 0.5, seed * 2.0, seed - 7.25, seed * seed};
  return r;
}

int64_t NAME(_leaf)(int64_t x) { return x * 7 + 1; }
