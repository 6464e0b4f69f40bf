// SPDX-License-Identifier: MIT
// The traced functions a test shared by every ISA's leg runs: each leg
// supplies them from its own traced sources (tests/<isa>/inline_targets.cpp).
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
