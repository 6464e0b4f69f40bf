// SPDX-License-Identifier: MIT
// BulkVector and BulkString (core/bulk_memory.h): large arrays keep their
// contents as they grow across the threshold, get 2 MiB-aligned mappings
// advised as huge pages, and small ones stay on the heap.
#include "core/bulk_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/unit/smaps_field.h"

namespace ftjit {
namespace {

#if defined(FTJIT_TEST_ASAN)
constexpr bool kMapped = false;  // under ASan the arrays stay on the heap
#else
constexpr bool kMapped = true;
#endif

// The VmFlags line of the mapping that holds `p` in /proc/self/smaps.
std::string vm_flags_of(const void* p) { return smaps_field_of(p, "VmFlags:"); }

TEST(BulkMemory, GrowsAcrossTheThresholdKeepingItsContents) {
  BulkVector<uint64_t> v;
  const size_t n = 3 * kBulkBytes / sizeof(uint64_t);  // from the heap into a mapping
  for (size_t i = 0; i < n; ++i) v.push_back(i * 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 0x9e3779b97f4a7c15ull) << i;
  if (kMapped) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u);  // a huge page's
  }
  v.clear();
  v.shrink_to_fit();  // gives the mapping back; nothing to check but that it does not crash
  EXPECT_TRUE(v.empty());
}

TEST(BulkMemory, LargeArraysAreAdvisedAsHugePages) {
  BulkVector<uint8_t> v(kBulkBytes + 123, 0x5a);  // under 2 MiB too: one huge page
  EXPECT_EQ(v.front(), 0x5a);
  EXPECT_EQ(v.back(), 0x5a);
#if defined(__x86_64__)
  // Natively only: under qemu-user the guest's madvise is not the host's.
  if (kMapped) {
    const std::string flags = vm_flags_of(v.data());
    ASSERT_FALSE(flags.empty()) << "no mapping holds the array";
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
#endif
}

TEST(BulkMemory, SmallArraysAndStringsWork) {
  BulkVector<int> small(10, 7);
  EXPECT_EQ(small[9], 7);
  BulkString s;
  for (int i = 0; i < 200000; ++i) s.append("ftjit_site_");  // 2.2 MB: past the threshold
  EXPECT_EQ(s.size(), 200000u * 11);
  EXPECT_EQ(s.substr(s.size() - 11), "ftjit_site_");
  const BulkString copy = s;
  EXPECT_EQ(copy, s);
}

}  // namespace
}  // namespace ftjit
