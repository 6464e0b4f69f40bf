/* SPDX-License-Identifier: MIT */
/* The library hazard_target dlopen()s, calls into and dlclose()s in a loop:
 * patchable functions (built like the target) that a tracer attached to
 * the target selects while the library is loaded, and loses when it goes. */
__attribute__((noinline, used)) int hazard_lib_leaf(int x) { return x * 3 + 1; }

__attribute__((noinline, used)) int hazard_lib_add(int a, int b) {
  /* Not a tail call: the leaf's frame is traced inside this one. */
  int r = hazard_lib_leaf(a) + b;
  return r - 1;
}
