// SPDX-License-Identifier: MIT
// The list walker's ip set: exact membership over pages of several
// modules, whatever the order it is built from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/dispatch.h"

namespace ftjit {
namespace {

// Entries spread like a program's: two modules far apart, functions of
// varied sizes, some pages with many entries, some with one. `per_module`
// past IpSet::kFlatMax / 2 makes a paged set.
std::vector<uint64_t> sample_ips(std::mt19937_64& rng, int per_module) {
  std::vector<uint64_t> ips;
  for (uint64_t base : {uint64_t{0x555555554000}, uint64_t{0x7f1234560000}}) {
    uint64_t at = base + 0x1000;
    for (int i = 0; i < per_module; ++i) {
      at += 1 + rng() % (i % 50 == 0 ? 20000 : 200);
      ips.push_back(at);
    }
  }
  return ips;
}

void check(const IpSet& set, const std::vector<uint64_t>& ips, std::mt19937_64& rng) {
  const std::set<uint64_t> members(ips.begin(), ips.end());
  for (uint64_t ip : ips) {
    ASSERT_TRUE(set.contains(ip)) << std::hex << ip;
    for (uint64_t near : {ip - 1, ip + 1, ip + 64, ip - 4096, ip + 4096}) {
      EXPECT_EQ(set.contains(near), members.count(near) != 0) << std::hex << near;
    }
  }
  for (int i = 0; i < 20000; ++i) {
    const uint64_t ip = ips[rng() % ips.size()] + (rng() % 65536) - 32768;
    EXPECT_EQ(set.contains(ip), members.count(ip) != 0) << std::hex << ip;
  }
  // Outside every page: page 0 included (its key is not the empty mark).
  for (uint64_t ip : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{0x1000}, ~uint64_t{0}}) {
    EXPECT_FALSE(set.contains(ip)) << std::hex << ip;
  }
}

class IpSetForm : public ::testing::TestWithParam<int> {};

TEST_P(IpSetForm, SortedInputHasExactlyItsMembers) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> ips = sample_ips(rng, GetParam());
  check(IpSet(ips), ips, rng);
}

TEST_P(IpSetForm, ShuffledAndRepeatedInputToo) {
  std::mt19937_64 rng(2);
  std::vector<uint64_t> ips = sample_ips(rng, GetParam());
  std::vector<uint64_t> input = ips;
  input.insert(input.end(), ips.begin(), ips.begin() + 1000);
  std::shuffle(input.begin(), input.end(), rng);
  check(IpSet(input), ips, rng);
}

// 2 x 5000 entries: the flat table; 2 x 40000: the paged one.
INSTANTIATE_TEST_SUITE_P(Forms, IpSetForm, ::testing::Values(5000, 40000),
                         [](const auto& info) {
                           return std::string(info.param * 2 > int(IpSet::kFlatMax) ? "paged"
                                                                                   : "flat");
                         });

TEST(IpSet, EmptyAndSingle) {
  std::mt19937_64 rng(3);
  IpSet none{std::vector<uint64_t>{}};
  EXPECT_FALSE(none.contains(0x401000));
  EXPECT_FALSE(none.contains(0));
  std::vector<uint64_t> one{0x401234};
  check(IpSet(one), one, rng);
}

}  // namespace
}  // namespace ftjit
