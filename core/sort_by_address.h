// SPDX-License-Identifier: MIT
// sort_by_address: an in-place sort of many items by one 64-bit key (an
// address), for the symbol tables of very large modules. A radix sort
// touches each item a few times where a comparison sort of a million
// symbols makes some twenty million compares; in place (most significant
// digit first, each bucket's items swapped into it, then each bucket by
// the next digit) because a second array as large as the items is fresh
// memory, a page fault per page (40 MB for a million symbols). Digits
// every key shares (the high bits of a module's addresses) are skipped.
// Not stable: items with equal keys come in no particular order.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace ftjit {
namespace sort_by_address_detail {

constexpr unsigned kDigitBits = 11;
constexpr size_t kBuckets = size_t{1} << kDigitBits;
// Below this many items a comparison sort is as fast.
constexpr size_t kRadixFrom = 256;

// Sorts [first, last), whose keys agree on every bit above `top` (the
// highest bit still to sort by, plus one).
template <typename It, typename KeyOf>
void sort_digits(It first, It last, KeyOf& key_of, unsigned top) {
  const auto n = static_cast<size_t>(last - first);
  if (n < 2 || top == 0) return;
  if (n < kRadixFrom) {
    std::sort(first, last, [&](const auto& a, const auto& b) { return key_of(a) < key_of(b); });
    return;
  }
  const unsigned shift = top > kDigitBits ? top - kDigitBits : 0;
  const uint64_t mask = (uint64_t{1} << (top - shift)) - 1;
  auto digit = [&](const auto& item) { return static_cast<size_t>((key_of(item) >> shift) & mask); };

  std::array<size_t, kBuckets + 1> start{};
  for (It it = first; it != last; ++it) ++start[digit(*it) + 1];
  for (size_t b = 1; b <= kBuckets; ++b) start[b] += start[b - 1];
  // American flag sort: each bucket's next free place, filled by swapping
  // the item found there to its own bucket until one of this bucket's
  // comes back.
  std::array<size_t, kBuckets> next;
  std::copy(start.begin(), start.end() - 1, next.begin());
  for (size_t b = 0; b < kBuckets; ++b) {
    while (next[b] < start[b + 1]) {
      auto& here = first[static_cast<ptrdiff_t>(next[b])];
      const size_t d = digit(here);
      if (d == b) {
        ++next[b];
      } else {
        std::swap(here, first[static_cast<ptrdiff_t>(next[d]++)]);
      }
    }
  }
  for (size_t b = 0; b < kBuckets; ++b) {
    sort_digits(first + static_cast<ptrdiff_t>(start[b]), first + static_cast<ptrdiff_t>(start[b + 1]), key_of,
                shift);
  }
}

}  // namespace sort_by_address_detail

// Items: a std::vector or a BulkVector (core/bulk_memory.h).
template <typename Vector, typename KeyOf>
void sort_by_address(Vector& items, KeyOf key_of) {
  uint64_t any = 0, every = ~uint64_t{0};
  for (const auto& item : items) {
    any |= key_of(item);
    every &= key_of(item);
  }
  // Bits above the highest that differs are the same in every key.
  const auto top = static_cast<unsigned>(std::bit_width(any ^ every));
  sort_by_address_detail::sort_digits(items.begin(), items.end(), key_of, top);
}

}  // namespace ftjit
