// SPDX-License-Identifier: MIT
// The C++ embedding API: sessions, probes with lambdas, RAII detach.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ftjit/ftjit.hpp"
#include "tests/e2e/traced.h"

namespace {

TEST(CppApi, ProbeWithLambdaDetachesWhenDestroyed) {
  std::string error;
  auto session = ftjit::Session::open(&error);
  ASSERT_NE(session, nullptr) << error;
  std::vector<std::string> seen;
  uint8_t before[13];
  uintptr_t fn_at = reinterpret_cast<uintptr_t>(traced_six);
  std::memcpy(before, reinterpret_cast<const void*>(fn_at - 8), 13);
  {
    auto probe = session->attach({{"traced_six", "traced_add"}, {}},
                                 [&](const ftjit::Call& c) {
                                   seen.push_back(session->name_of(c.ip) + ":" +
                                                  std::to_string(c.arg(0)));
                                 },
                                 FTJIT_STRATEGY_AUTO, &error);
    ASSERT_NE(probe, nullptr) << error;
    EXPECT_EQ(probe->site_count(), 2);
    long (*volatile six)(long, long, long, long, long, long) = traced_six;
    EXPECT_EQ(six(7, 0, 0, 0, 0, 0), 7);
    int (*volatile add)(int, int) = traced_add;
    EXPECT_EQ(add(5, 6), 11);
    EXPECT_EQ(probe->set_filter({{"traced_add"}, {}}), FTJIT_OK);
    EXPECT_EQ(six(8, 0, 0, 0, 0, 0), 8);
  }
  long (*volatile six)(long, long, long, long, long, long) = traced_six;
  EXPECT_EQ(six(9, 0, 0, 0, 0, 0), 9);
  EXPECT_EQ(seen, (std::vector<std::string>{"traced_six:7", "traced_add:5"}));
  EXPECT_EQ(std::memcmp(before, reinterpret_cast<const void*>(fn_at - 8), 13), 0);
  EXPECT_EQ(session->stats().sites_enabled, 0u);
}

TEST(CppApi, ProbeWithExitLambdaSeesReturnValues) {
  std::string error;
  auto session = ftjit::Session::open(&error);
  ASSERT_NE(session, nullptr) << error;
  std::vector<std::string> seen;
  {
    auto probe = session->attach(
        {{"traced_add"}, {}},
        [&](const ftjit::Call& c) { seen.push_back("in:" + std::to_string(c.arg(0))); },
        [&](const ftjit::Return& r) {
          seen.push_back("out:" + std::to_string(static_cast<int>(r.ret->ret[0])));
        },
        FTJIT_STRATEGY_AUTO, &error);
    ASSERT_NE(probe, nullptr) << error;
    int (*volatile add)(int, int) = traced_add;
    EXPECT_EQ(add(5, 6), 11);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"in:5", "out:11"}));
}

TEST(CppApi, FailuresReturnNullWithAMessage) {
  auto session = ftjit::Session::open();
  ASSERT_NE(session, nullptr);
  std::string error;
  EXPECT_EQ(ftjit::Session::open(&error), nullptr);
  EXPECT_NE(error.find("exists already"), std::string::npos) << error;
  auto probe = session->attach({{"nothing_like_this*"}, {}}, [](const ftjit::Call&) {},
                               FTJIT_STRATEGY_AUTO, &error);
  EXPECT_EQ(probe, nullptr);
  EXPECT_NE(error.find("matches none"), std::string::npos) << error;
}

}  // namespace
