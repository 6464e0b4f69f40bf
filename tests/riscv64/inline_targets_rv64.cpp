// SPDX-License-Identifier: MIT
// riscv64's traced functions for tests/common/inline_count_test.cpp: the
// leaf of each layout (=8,4 built for rv64gc, =4,2 for rv64g).
#include "tests/common/inline_targets.h"
#include "tests/riscv64/traced_rv64.h"

namespace {
int64_t expected(int64_t x) { return x * 7 + 1; }
template <int64_t (*Fn)(int64_t)>
int64_t call(int64_t x) {
  int64_t (*volatile fn)(int64_t) = Fn;
  return fn(x);
}
}  // namespace

std::vector<InlineTarget> inline_targets() {
  return {{"rvc_8_4", "rv_c_leaf", reinterpret_cast<uint64_t>(&rv_c_leaf), call<rv_c_leaf>, expected},
          {"rvg_4_2", "rv_g_leaf", reinterpret_cast<uint64_t>(&rv_g_leaf), call<rv_g_leaf>, expected}};
}
