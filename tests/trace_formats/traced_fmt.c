/* SPDX-License-Identifier: MIT */
/* Functions gen_trace traces; built with -fpatchable-function-entry=5 -O2.
 * noinline + noipa: no inlining, no clones (.isra/.constprop), so every call
 * goes through the patched entry. The empty asm statements keep GCC from
 * turning a call into a tail call or the recursion into a loop, so that the
 * number of nested slices is exactly what the generator announces. */
#include "traced_fmt.h"

#define TRACED __attribute__((noinline, noipa))
#define KEEP(v) __asm__ volatile("" : "+r"(v))

TRACED int trfmt_leaf(int x) {
  int r = x * 3 + 1;
  KEEP(r);
  return r;
}

TRACED int trfmt_middle(int x) {
  int a = trfmt_leaf(x);
  int b = trfmt_leaf(x + 1);
  KEEP(b);
  return a + b;
}

TRACED int trfmt_outer(int x) {
  int a = trfmt_middle(x);
  int b = trfmt_leaf(x);
  KEEP(b);
  return a ^ b;
}

TRACED int trfmt_recurse(int depth) {
  if (depth <= 0) return 0;
  int r = trfmt_recurse(depth - 1);
  KEEP(r);
  return r + 1;
}
