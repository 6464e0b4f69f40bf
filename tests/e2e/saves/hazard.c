/* SPDX-License-Identifier: MIT */
/* A caller that keeps twelve doubles live across a call of a traced
 * function (TOOLCHAIN.md Q6). Where -fipa-ra is on (the attribute alone,
 * an `optimize` attribute, clang's IPRA) the caller keeps them in xmm2-13
 * across the call, trusting the callee to leave them: a trampoline that
 * keeps only the psABI's registers breaks it. Built several ways by
 * tests/CMakeLists.txt (HAZARD_OPTIMIZE: the attribute on both). */
#ifdef HAZARD_OPTIMIZE
#define OPT __attribute__((optimize("O2")))
#else
#define OPT
#endif
#ifdef HAZARD_ATTRIBUTE
#define PATCH __attribute__((patchable_function_entry(5)))
#else
#define PATCH
#endif

/* Hidden: calls stay inside the library, where -fipa-ra may use what it
 * knows of the callee. */
#define LOCAL __attribute__((noinline, visibility("hidden")))

LOCAL PATCH OPT double hz_callee(double x) { return x * 1.5; }

__attribute__((noinline)) OPT double hz_caller(double seed) {
  double a = seed + 1, b = seed * 2, c = seed + 3, d = seed * 4, e = seed + 5, f = seed * 6,
         g = seed + 7, h = seed * 8, i = seed + 9, j = seed * 10, k = seed + 11, l = seed * 12;
  double r = hz_callee(seed);
  return r + a * b + c * d + e * f + g * h + i * j + k * l + a * l + b * k + c * j + d * i + e * h + f * g;
}
