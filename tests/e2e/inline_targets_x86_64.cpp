// SPDX-License-Identifier: MIT
// x86-64's traced functions for tests/common/inline_count_test.cpp: one of
// each layout (=13,8 with an ops slot, =5 without).
#include "tests/common/inline_targets.h"
#include "tests/e2e/traced.h"

namespace {
int64_t call_add(int64_t x) {
  int (*volatile fn)(int, int) = traced_add;
  return fn(static_cast<int>(x), 1);
}
int64_t expect_add(int64_t x) { return static_cast<int>(x) + 1; }
int64_t call_mul(int64_t x) {
  int (*volatile fn)(int, int) = traced_noslot_mul;
  return fn(static_cast<int>(x), 3);
}
int64_t expect_mul(int64_t x) { return static_cast<int>(x) * 3; }
}  // namespace

std::vector<InlineTarget> inline_targets() {
  return {{"slot", "traced_add", reinterpret_cast<uint64_t>(&traced_add), call_add, expect_add},
          {"noslot", "traced_noslot_mul", reinterpret_cast<uint64_t>(&traced_noslot_mul), call_mul,
           expect_mul}};
}
