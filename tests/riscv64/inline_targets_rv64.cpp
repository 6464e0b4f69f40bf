// SPDX-License-Identifier: MIT
// riscv64's traced functions for tests/common/inline_count_test.cpp: the
// leaf of each layout (=8,4 built for rv64gc, =4,2 for rv64g).
#include "tests/common/inline_targets.h"
#include "tests/riscv64/traced_rv64.h"

std::vector<InlineTarget> inline_targets() {
  return {{"rvc_8_4", "rv_c_leaf", reinterpret_cast<uint64_t>(&rv_c_leaf), call_leaf<rv_c_leaf>, leaf_expected},
          {"rvg_4_2", "rv_g_leaf", reinterpret_cast<uint64_t>(&rv_g_leaf), call_leaf<rv_g_leaf>, leaf_expected}};
}
