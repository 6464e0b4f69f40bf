// SPDX-License-Identifier: MIT
// Unused trampoline memory traps (a stray jump stops at once), though an
// arena is filled only as allocations reach it (runtime/code_memory.h):
// beside an allocation, in an allocation past the first fill, and in a
// freed block. Run natively (tests/e2e, int3) and by the emulated legs
// (tests/common/engine_test.cpp, where fresh zeros are the traps).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/arch/arch.h"
#include "runtime/code_memory.h"

namespace ftjit::testing {

inline void expect_unused_arena_memory_traps(uint64_t near, int64_t reach) {
  auto arena = CodeArena::create_near(near, reach, 1u << 20);
  ASSERT_TRUE(arena) << arena.error().message;
  CodeArena& a = **arena;
  std::vector<uint8_t> traps(256 << 10);
  arch::fill_with_traps(traps.data(), traps.size());
  auto all_traps = [&](uint64_t from, size_t n) { return std::memcmp(a.rw(from), traps.data(), n) == 0; };
  const uint64_t first = a.allocate(64, 16);
  ASSERT_EQ(first, a.lo());
  std::memset(a.rw(first), 0x5a, 64);
  EXPECT_TRUE(all_traps(first + 64, (64u << 10) - 64)) << "beside the first allocation";
  const uint64_t big = a.allocate(100u << 10, 16);  // past the first 64 KiB
  ASSERT_NE(big, 0u);
  EXPECT_TRUE(all_traps(big, 100u << 10)) << "a fresh allocation past the first fill";
  const uint64_t end = big + (100u << 10);
  EXPECT_TRUE(all_traps(end, (a.lo() + (128u << 10)) - end)) << "beside the second allocation";
  std::memset(a.rw(big), 0x5a, 100u << 10);
  a.free(big);
  EXPECT_TRUE(all_traps(big, 100u << 10)) << "a freed block";
}

}  // namespace ftjit::testing
