// SPDX-License-Identifier: MIT
// What each plugin's event path costs per call through the fake host, minus
// the fake host's own thread_storage lookup. Printed, not gated: timing on a
// shared machine is no pass/fail criterion. What the loops recorded is
// checked, so each test still fails if the plugin loses calls.
#include "fake_host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <string>

// Named, not anonymous: the unity build compiles this file beside the other
// plugins' tests, whose helpers have the same names.
namespace event_cost_test {

using fake_host::Session;
using Clock = std::chrono::steady_clock;

constexpr int kFunctions = 64;
constexpr uint64_t kBase = 0x500000;

uint64_t ip_of(int i) { return kBase + uint64_t(i % kFunctions) * 16; }

void use_symbols() {
  std::map<uint64_t, std::string> symbols;
  for (int f = 0; f < kFunctions; ++f) symbols[ip_of(f)] = "f" + std::to_string(100 + f);
  fake_host::set_symbols(symbols);
}

double ns_per(Clock::duration elapsed, int calls) {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed)
                    .count()) / calls;
}

// The fake host's share of every event: one thread_storage lookup.
double host_lookup_ns(Session &session) {
  constexpr int kCalls = 2'000'000;
  void *sink = nullptr;
  const auto start = Clock::now();
  for (int i = 0; i < kCalls; ++i) {
    sink = fake_host::host()->thread_storage(session.ctx());
    asm volatile("" : : "r"(sink) : "memory");
  }
  return ns_per(Clock::now() - start, kCalls);
}

// Entry and exit of a depth-1 call, `calls` times, through the callbacks.
Clock::duration call_pairs(Session &session, int calls) {
  const ftjit_plugin &plugin = session.plugin();
  ftjit_plugin_regs regs{};
  ftjit_plugin_ret ret{};
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    plugin.entry(ip_of(i), 0, session.ctx(), &regs);
    if (plugin.exit != nullptr) plugin.exit(ip_of(i), 0, session.ctx(), &ret);
  }
  return Clock::now() - start;
}

TEST(EventCostTest, Count) {
  use_symbols();
  Session session(FTJIT_PLUGIN_COUNT_SO, {}, "tsv");
  ASSERT_EQ(session.init(), 0);
  constexpr int kCalls = 4'000'000;
  const double total = ns_per(call_pairs(session, kCalls), kCalls);
  std::printf("count entry: %.1f ns/call, of which fake host lookup %.1f\n",
              total, host_lookup_ns(session));
  ASSERT_EQ(session.report(), 0);
  const std::string tsv = session.output();
  EXPECT_NE(tsv.find("f100\t62500\n"), std::string::npos);
  EXPECT_EQ(std::count(tsv.begin(), tsv.end(), '\n'), kFunctions);
}

TEST(EventCostTest, Latency) {
  use_symbols();
  Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "json");
  ASSERT_EQ(session.init(), 0);
  constexpr int kCalls = 2'000'000;
  const double total = ns_per(call_pairs(session, kCalls), kCalls);
  std::printf("latency entry+exit: %.1f ns/call (2 clock reads), of which "
              "fake host lookups %.1f\n",
              total, 2 * host_lookup_ns(session));
  ASSERT_EQ(session.report(), 0);
  EXPECT_NE(session.output().find("\"count\":31250,"), std::string::npos);
}

TEST(EventCostTest, Flame) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {{"weight", "calls"}});
  ASSERT_EQ(session.init(), 0);
  constexpr int kCalls = 2'000'000;
  const double total = ns_per(call_pairs(session, kCalls), kCalls);
  std::printf("flame entry+exit: %.1f ns/call, of which fake host lookups "
              "%.1f\n",
              total, 2 * host_lookup_ns(session));
  ASSERT_EQ(session.report(), 0);
  EXPECT_NE(session.output().find("\nf101 31250\n"), std::string::npos);
}

TEST(EventCostTest, Trace) {
  use_symbols();
  constexpr int kCalls = 200'000;
  Session session(FTJIT_PLUGIN_TRACE_SO, {}, "perfetto", 2 * kCalls);
  ASSERT_EQ(session.init(), 0);
  const double total = ns_per(call_pairs(session, kCalls), kCalls);
  std::printf("trace entry+exit: %.1f ns/call (2 clock reads, 2 ring "
              "slots), of which fake host lookups %.1f (x4)\n",
              total, 4 * host_lookup_ns(session));
  EXPECT_EQ(session.events_dropped(), 0u);
  ASSERT_EQ(session.report(), 0);
  EXPECT_GT(session.output().size(), size_t(kCalls) * 2 * 8);
}

}  // namespace event_cost_test
