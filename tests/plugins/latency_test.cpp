// SPDX-License-Identifier: MIT
// latency plugin against the fake host: bpftrace-style histograms and
// percentiles for durations the test's clock dictates.
#include "fake_host.h"
#include "wire_readers.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <string>
#include <thread>

// Named, not anonymous: the unity build compiles this file beside the other
// plugins' tests, whose helpers have the same names.
namespace latency_test {

using fake_host::Session;

constexpr uint64_t kRead = 0x401000, kWrite = 0x402000, kOuter = 0x403000,
                   kRecurse = 0x404000;

void use_symbols() {
  fake_host::set_symbols({{kRead, "read_block"},
                          {kWrite, "write_block"},
                          {kOuter, "outer"},
                          {kRecurse, "recurse"}});
}

// One call of `ip` lasting `duration_ns` on the calling thread's clock.
void timed_call(Session &session, uint64_t ip, uint64_t &clock,
                uint64_t duration_ns) {
  fake_host::set_now(clock);
  session.enter(ip);
  clock += duration_ns;
  fake_host::set_now(clock);
  session.leave(ip);
  clock += 1;
}

TEST(LatencyTest, TextHistogramAndEstimatedPercentiles) {
  use_symbols();
  Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "text");
  ASSERT_EQ(session.init(), 0) << session.error();
  uint64_t clock = 1'000'000;
  // read_block: 99 calls of 1000 ns and one of 1 ms, on two threads.
  std::thread([&] {
    uint64_t thread_clock = clock;
    for (int i = 0; i < 60; ++i) timed_call(session, kRead, thread_clock, 1000);
  }).join();
  std::thread([&] {
    uint64_t thread_clock = clock;
    for (int i = 0; i < 39; ++i) timed_call(session, kRead, thread_clock, 1000);
    timed_call(session, kRead, thread_clock, 1'000'000);
    // write_block: 0, 1 and 3 ns.
    timed_call(session, kWrite, thread_clock, 0);
    timed_call(session, kWrite, thread_clock, 1);
    timed_call(session, kWrite, thread_clock, 3);
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  // p50 of read_block: rank 50 of the 99 in [512, 1K): 512 + 512*50/99.
  // p99: rank 99, the top of that bucket, 1024.
  // write_block p50: rank 2 is the 1 in [1]; p99: rank 3 in [2, 4): 2+2*1/1
  // = 4, capped by the exact max 3.
  EXPECT_EQ(session.output(),
            "@read_block:\n"
            "[512, 1K)             99 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[1K, 2K)               0 |                                                    |\n"
            "[2K, 4K)               0 |                                                    |\n"
            "[4K, 8K)               0 |                                                    |\n"
            "[8K, 16K)              0 |                                                    |\n"
            "[16K, 32K)             0 |                                                    |\n"
            "[32K, 64K)             0 |                                                    |\n"
            "[64K, 128K)            0 |                                                    |\n"
            "[128K, 256K)           0 |                                                    |\n"
            "[256K, 512K)           0 |                                                    |\n"
            "[512K, 1M)             1 |                                                    |\n"
            "count 100, p50 ~770 ns, p99 ~1024 ns, max 1000000 ns, total 1099000 ns\n"
            "\n"
            "@write_block:\n"
            "[0]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "[2, 4)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
            "count 3, p50 ~1 ns, p99 ~3 ns, max 3 ns, total 4 ns\n"
            "\n"
            "durations in ns; p50/p99 are estimated inside the log2 buckets, "
            "max and total are exact\n"
            "not timed: 0 unwound (exception/longjmp), 0 deeper than 128 "
            "frames, 0 with the table full, 0 on threads beyond max_threads, 0 "
            "exits without entry\n"
            "dropped: 0 calls made inside tracer callbacks (untraced)\n");
}

TEST(LatencyTest, UnwoundFramesAreNotTimedButTheirCallerIs) {
  use_symbols();
  Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  fake_host::set_now(100);
  session.enter(kOuter);
  fake_host::set_now(200);
  session.enter(kRead);
  fake_host::set_now(300);
  session.leave(kRead, 0, /*unwound=*/true);
  fake_host::set_now(5100);
  session.leave(kOuter);
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  const wire::Json &functions = *json->get("functions");
  ASSERT_EQ(functions.items.size(), 1u);
  const wire::Json &outer = functions.items[0];
  EXPECT_EQ(outer.get("name")->text, "outer");
  EXPECT_EQ(outer.get("count")->number, 1);
  EXPECT_EQ(outer.get("max_ns")->number, 5000);
  const wire::Json &buckets = *outer.get("buckets");
  ASSERT_EQ(buckets.items.size(), 1u);
  EXPECT_EQ(buckets.items[0].get("lo")->number, 4096);
  EXPECT_EQ(buckets.items[0].get("hi")->number, 8192);
  EXPECT_EQ(json->get("not_timed")->get("unwound")->number, 1);
}

TEST(LatencyTest, FramesBeyondTheStackAreCountedNotTimed) {
  use_symbols();
  Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  constexpr int kDepth = 130;  // two more than the plugin keeps
  fake_host::set_now(0);
  for (int i = 0; i < kDepth; ++i) session.enter(kRecurse);
  fake_host::set_now(64);
  for (int i = 0; i < kDepth; ++i) session.leave(kRecurse);
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error;
  EXPECT_EQ(json->get("functions")->items[0].get("count")->number, 128);
  EXPECT_EQ(json->get("not_timed")->get("too_deep")->number, 2);
}

TEST(LatencyTest, InitRefusesBadOptions) {
  for (const auto &options : {std::map<std::string, std::string>{{"table_size", "1000"}},
                              std::map<std::string, std::string>{{"max_threads", "-1"}}}) {
    Session session(FTJIT_PLUGIN_LATENCY_SO, options);
    EXPECT_NE(session.init(), 0);
    EXPECT_NE(session.error().find(options.begin()->first), std::string::npos)
        << session.error();
  }
}

TEST(LatencyTest, InstancesWithDifferentOptionsStayIndependent) {
  use_symbols();
  // small: one function per table; one_thread: only the first thread timed.
  Session small(FTJIT_PLUGIN_LATENCY_SO, {{"table_size", "2"}}, "json");
  Session one_thread(FTJIT_PLUGIN_LATENCY_SO, {{"max_threads", "1"}}, "json");
  ASSERT_EQ(small.init(), 0) << small.error();
  ASSERT_EQ(one_thread.init(), 0) << one_thread.error();
  // Interleaved on one thread: each instance keeps its own stack of starts.
  fake_host::set_now(0);
  small.enter(kRead);
  one_thread.enter(kOuter);
  fake_host::set_now(100);
  one_thread.enter(kRead);
  fake_host::set_now(300);
  one_thread.leave(kRead);
  fake_host::set_now(1000);
  small.leave(kRead);
  small.enter(kWrite);
  fake_host::set_now(1100);
  small.leave(kWrite);  // small's table is full
  fake_host::set_now(5000);
  one_thread.leave(kOuter);
  std::thread([&] {
    one_thread.enter(kWrite);
    one_thread.leave(kWrite);
  }).join();
  ASSERT_EQ(small.report(), 0) << small.error();
  ASSERT_EQ(one_thread.report(), 0) << one_thread.error();

  std::string error;
  auto first = wire::parse_json(small.output(), &error);
  ASSERT_TRUE(first) << error << "\n" << small.output();
  ASSERT_EQ(first->get("functions")->items.size(), 1u);
  EXPECT_EQ(first->get("functions")->items[0].get("name")->text, "read_block");
  EXPECT_EQ(first->get("functions")->items[0].get("max_ns")->number, 1000);
  EXPECT_EQ(first->get("not_timed")->get("table_full")->number, 1);
  EXPECT_EQ(first->get("not_timed")->get("threads_over_limit")->number, 0);

  auto second = wire::parse_json(one_thread.output(), &error);
  ASSERT_TRUE(second) << error << "\n" << one_thread.output();
  const wire::Json &functions = *second->get("functions");
  ASSERT_EQ(functions.items.size(), 2u);
  EXPECT_EQ(functions.items[0].get("name")->text, "outer");
  EXPECT_EQ(functions.items[0].get("max_ns")->number, 5000);
  EXPECT_EQ(functions.items[1].get("name")->text, "read_block");
  EXPECT_EQ(functions.items[1].get("max_ns")->number, 200);
  EXPECT_EQ(second->get("not_timed")->get("table_full")->number, 0);
  EXPECT_EQ(second->get("not_timed")->get("threads_over_limit")->number, 1);
}

TEST(LatencyTest, InitRefusesAHostWithoutInstanceData) {
  for (const size_t size : {offsetof(ftjit_host, set_instance_data),
                            offsetof(ftjit_host, process_name)}) {
    Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "", 0,
                    fake_host::host_of_size(uint32_t(size)));
    EXPECT_NE(session.init(), 0) << size;
    EXPECT_NE(session.error().find("host is too old"), std::string::npos)
        << session.error();
  }
}

}  // namespace latency_test

namespace latency_test {

// What the engine timed inline merges with what the callbacks timed, per
// function; its unwound frames join the callbacks' in "not timed".
TEST(LatencyTest, InlineHistogramsAddToTheCallbacks) {
  use_symbols();
  Session session(FTJIT_PLUGIN_LATENCY_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  ASSERT_NE(session.plugin().inline_work, nullptr);
  EXPECT_EQ(session.plugin().inline_work->entry, uint32_t{FTJIT_PLUGIN_INLINE_LATENCY});
  EXPECT_EQ(session.plugin().inline_work->exit, uint32_t{FTJIT_PLUGIN_INLINE_LATENCY});
  uint64_t clock = 1'000'000;
  timed_call(session, kRead, clock, 1000);  // a thread's first call: the callbacks
  ftjit_plugin_histogram read{};
  read.ip = kRead;
  read.calls = 3;
  read.total_ns = 3 * 1500 + 0;
  read.max_ns = 4000;
  read.unwound = 2;
  read.buckets[11] = 2;  // [1K, 2K)
  read.buckets[12] = 1;  // [2K, 4K): the max is approximate per bucket
  ftjit_plugin_histogram write{};
  write.ip = kWrite;
  write.unwound = 1;     // no call timed: not listed, only counted
  session.set_inline_histograms({read, write});
  ASSERT_EQ(session.report(), 0) << session.error();
  const std::string out = session.output();
  EXPECT_NE(out.find("\"name\":\"read_block\",\"ip\":\"0x401000\",\"count\":4,\"total_ns\":5500,"
                     "\"max_ns\":4000"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("write_block"), std::string::npos) << out;
  EXPECT_NE(out.find("\"unwound\":3"), std::string::npos) << out;

  // A host from before inline_histograms: the callbacks' calls alone.
  const ftjit_host *old = fake_host::host_of_size(offsetof(ftjit_host, inline_histograms));
  Session older(FTJIT_PLUGIN_LATENCY_SO, {}, "json", 0, old);
  ASSERT_EQ(older.init(), 0) << older.error();
  timed_call(older, kRead, clock, 1000);
  older.set_inline_histograms({read});
  ASSERT_EQ(older.report(), 0) << older.error();
  EXPECT_NE(older.output().find("\"count\":1,"), std::string::npos) << older.output();
}

}  // namespace latency_test
