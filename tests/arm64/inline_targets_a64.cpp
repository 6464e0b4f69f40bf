// SPDX-License-Identifier: MIT
// arm64's traced functions for tests/common/inline_count_test.cpp: the
// leaf of each layout (=4,2 with its literal, =2, =4,2 behind `bti c`).
#include "tests/arm64/traced_a64.h"
#include "tests/common/inline_targets.h"

namespace {
int64_t expected(int64_t x) { return x * 7 + 1; }
template <int64_t (*Fn)(int64_t)>
int64_t call(int64_t x) {
  int64_t (*volatile fn)(int64_t) = Fn;
  return fn(x);
}
}  // namespace

std::vector<InlineTarget> inline_targets() {
  return {{"literal", "a64_slot_leaf", reinterpret_cast<uint64_t>(&a64_slot_leaf), call<a64_slot_leaf>, expected},
          {"noliteral", "a64_noslot_leaf", reinterpret_cast<uint64_t>(&a64_noslot_leaf), call<a64_noslot_leaf>,
           expected},
          // The site starts after the landing pad: ip is entry + 4.
          {"bti", "a64_bti_leaf", reinterpret_cast<uint64_t>(&a64_bti_leaf) + 4, call<a64_bti_leaf>, expected}};
}
