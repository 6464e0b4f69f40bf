// SPDX-License-Identifier: MIT
// stable_sort_by_address: a stable sort of many items by one 64-bit key
// (an address), for the symbol tables of very large modules. A least-
// significant-digit radix sort touches each item a few times where a
// comparison sort of a million symbols makes some twenty million compares;
// digits every key shares (the high bits of a module's addresses) are
// skipped.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace ftjit {

// Items: a std::vector or a BulkVector (core/bulk_memory.h); the buffer
// between passes is the same kind.
template <typename Vector, typename KeyOf>
void stable_sort_by_address(Vector& items, KeyOf key_of) {
  using T = typename Vector::value_type;
  static_assert(std::is_trivially_copyable_v<T>, "items are moved as bytes between passes");
  // Small inputs: a comparison sort is as fast and allocates nothing.
  constexpr size_t kRadixFrom = 4096;
  if (items.size() < kRadixFrom) {
    std::stable_sort(items.begin(), items.end(),
                     [&](const T& a, const T& b) { return key_of(a) < key_of(b); });
    return;
  }
  uint64_t any = 0, every = ~uint64_t{0};
  for (const T& item : items) {
    any |= key_of(item);
    every &= key_of(item);
  }
  const uint64_t varying = any ^ every;

  constexpr unsigned kDigitBits = 11;
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  Vector buffer(items.size());
  for (unsigned shift = 0; shift < 64; shift += kDigitBits) {
    if (((varying >> shift) & (kBuckets - 1)) == 0) continue;  // the same digit in every key
    std::array<size_t, kBuckets + 1> start{};
    for (const T& item : items) ++start[((key_of(item) >> shift) & (kBuckets - 1)) + 1];
    for (size_t b = 1; b <= kBuckets; ++b) start[b] += start[b - 1];
    for (const T& item : items) buffer[start[(key_of(item) >> shift) & (kBuckets - 1)]++] = item;
    items.swap(buffer);
  }
}

}  // namespace ftjit
