// SPDX-License-Identifier: MIT
// arm64's traced functions for tests/common/inline_count_test.cpp: the
// leaf of each layout (=4,2 with its literal, =2, =4,2 behind `bti c`).
#include "tests/arm64/traced_a64.h"
#include "tests/common/inline_targets.h"

std::vector<InlineTarget> inline_targets() {
  return {{"literal", "a64_slot_leaf", reinterpret_cast<uint64_t>(&a64_slot_leaf), call_leaf<a64_slot_leaf>, leaf_expected},
          {"noliteral", "a64_noslot_leaf", reinterpret_cast<uint64_t>(&a64_noslot_leaf), call_leaf<a64_noslot_leaf>,
           leaf_expected},
          // The site starts after the landing pad: ip is entry + 4.
          {"bti", "a64_bti_leaf", reinterpret_cast<uint64_t>(&a64_bti_leaf) + 4, call_leaf<a64_bti_leaf>, leaf_expected}};
}
