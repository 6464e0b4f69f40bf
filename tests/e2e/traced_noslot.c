// SPDX-License-Identifier: MIT
// Traced functions without an ops slot (-fpatchable-function-entry=5), and
// one function with no patchable entry at all.
#include "traced.h"

__attribute__((noinline)) int traced_noslot_mul(int a, int b) { return a * b; }

__attribute__((noinline, patchable_function_entry(0, 0))) int untraced_function(int a) {
  return a - 1;
}
