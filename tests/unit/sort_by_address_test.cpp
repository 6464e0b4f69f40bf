// SPDX-License-Identifier: MIT
// sort_by_address against std::stable_sort: the same keys in the same
// order, and the same items (ties in any order), for inputs below and
// above the radix threshold and keys that share their high bits (as one
// module's addresses do).
#include "core/sort_by_address.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ftjit {
namespace {

struct Item {
  uint64_t address;
  uint32_t first_position;
};

std::vector<Item> random_items(size_t n, uint64_t base, uint64_t span, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Item> items(n);
  for (size_t i = 0; i < n; ++i) items[i] = {base + rng() % span, static_cast<uint32_t>(i)};
  return items;
}

void expect_sorted_as_by_std(std::vector<Item> items) {
  std::vector<Item> want = items;
  std::stable_sort(want.begin(), want.end(), [](const Item& a, const Item& b) { return a.address < b.address; });
  sort_by_address(items, [](const Item& i) { return i.address; });
  ASSERT_EQ(items.size(), want.size());
  for (size_t i = 0; i < items.size(); ++i) ASSERT_EQ(items[i].address, want[i].address) << "at " << i;
  // Each run of one key holds the same items: ties sorted by first position
  // on both sides must agree.
  auto by_both = [](const Item& a, const Item& b) {
    return a.address != b.address ? a.address < b.address : a.first_position < b.first_position;
  };
  std::sort(items.begin(), items.end(), by_both);
  std::sort(want.begin(), want.end(), by_both);
  for (size_t i = 0; i < items.size(); ++i) {
    ASSERT_EQ(items[i].first_position, want[i].first_position) << "an item lost or doubled at " << i;
  }
}

TEST(SortByAddress, SmallInputs) {
  expect_sorted_as_by_std({});
  expect_sorted_as_by_std(random_items(1, 0x1000, 16, 1));
  expect_sorted_as_by_std(random_items(100, 0x400000, 64, 2));  // many ties
  expect_sorted_as_by_std(random_items(300, 0x400000, 1 << 20, 6));  // one radix pass, then small buckets
}

TEST(SortByAddress, LargeInputsWithSharedHighBits) {
  expect_sorted_as_by_std(random_items(200'000, 0x7f0000000000, 1 << 26, 3));
  expect_sorted_as_by_std(random_items(50'000, 0x4000000, 1000, 4));  // many ties
}

TEST(SortByAddress, FullWidthKeys) {
  expect_sorted_as_by_std(random_items(100'000, 0, ~uint64_t{0}, 5));
  std::vector<Item> same(10'000, Item{0xffffffffffffffff, 0});
  for (uint32_t i = 0; i < same.size(); ++i) same[i].first_position = i;
  expect_sorted_as_by_std(same);
}

}  // namespace
}  // namespace ftjit
