// SPDX-License-Identifier: MIT
// Built with -fxray-instrument: entry and exit sleds (XRay compiles in a
// sled at every return; ftjit has only the entry NOPs and replaces the
// return address).
#include "xray_leaves.h"

extern "C" [[clang::xray_always_instrument]] __attribute__((noinline)) int xray_leaf_full(int x) {
  return x * 3 + 1;
}
