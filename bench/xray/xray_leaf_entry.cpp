// SPDX-License-Identifier: MIT
// Built with -fxray-instrument -fxray-instrumentation-bundle=function-entry:
// an entry sled only, as ftjit's sites are.
#include "xray_leaves.h"

extern "C" [[clang::xray_always_instrument]] __attribute__((noinline)) int xray_leaf_entry(int x) {
  return x * 3 + 1;
}
