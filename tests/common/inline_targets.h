// SPDX-License-Identifier: MIT
// The traced functions a test shared by every ISA's leg runs: each leg
// supplies them from its traced sources (the cross legs from
// traced_inline_targets.cpp, x86-64 from tests/e2e/inline_targets_x86_64.cpp).
#pragma once

#include <cstdint>
#include <vector>

struct InlineTarget {
  const char* layout;            // for test names: the sled layout
  const char* symbol;            // what a filter selects
  uint64_t entry;                // the site's entry (what ip is)
  int64_t (*call)(int64_t);      // calls it once; returns what it returned
  int64_t (*expected)(int64_t);  // what it returns untraced
};

std::vector<InlineTarget> inline_targets();

// The cross legs' traced leaf, `x * 7 + 1` (traced.c): what it returns,
// and a call of it through a pointer the compiler cannot see through.
inline int64_t leaf_expected(int64_t x) { return x * 7 + 1; }
template <int64_t (*Fn)(int64_t)>
int64_t call_leaf(int64_t x) {
  int64_t (*volatile fn)(int64_t) = Fn;
  return fn(x);
}
