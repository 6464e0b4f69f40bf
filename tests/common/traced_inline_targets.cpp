// SPDX-License-Identifier: MIT
// A cross leg's traced functions for inline_count_test.cpp and
// inline_latency_test.cpp: the leaf of each of the ISA's layouts
// (traced.h), its site past the landing pad if the layout has one.
#include "tests/common/inline_targets.h"
#include "tests/common/traced.h"

std::vector<InlineTarget> inline_targets() {
#define INLINE_TARGET(name, P, pad, literal) \
  {#name, #P "_leaf", reinterpret_cast<uint64_t>(&P##_leaf) + (pad), call_leaf<P##_leaf>, leaf_expected},
  return {FTJIT_TRACED_LAYOUTS(INLINE_TARGET)};
#undef INLINE_TARGET
}
