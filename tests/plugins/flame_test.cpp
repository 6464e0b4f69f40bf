// SPDX-License-Identifier: MIT
// flame plugin against the fake host: folded stacks for known call
// patterns, including unwound frames, depth and table limits.
#include "fake_host.h"
#include "wire_readers.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <string>
#include <thread>

// Named, not anonymous: the unity build compiles this file beside the other
// plugins' tests, whose helpers have the same names.
namespace flame_test {

using fake_host::Session;

constexpr uint64_t kMain = 0x401000, kA = 0x402000, kB = 0x403000,
                   kC = 0x404000, kD = 0x405000;

void use_symbols() {
  fake_host::set_symbols({{kMain, "main"},
                          {kA, "a"},
                          {kB, "std::vector<int>::b() const"},
                          {kC, "c;semi"},
                          {kD, "d"}});
}

const std::pair<const std::string, std::string> kByCalls{"weight", "calls"};

TEST(FlameTest, FoldedStacksMergeThreadsAndPopUnwoundFrames) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {kByCalls});
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    session.enter(kMain);
    session.enter(kA);
    session.enter(kB);
    // An exception leaves b and a: both exits are unwound.
    session.leave(kB, 0, /*unwound=*/true);
    session.leave(kA, 0, /*unwound=*/true);
    session.enter(kC);  // must land under main, not under main;a;b
    session.enter(kB);
    session.leave(kB);
    session.leave(kC);
    session.leave(kMain);
  }).join();
  std::thread([&] {
    session.enter(kMain);
    session.enter(kA);
    session.leave(kA);
    session.leave(kMain);
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  // ';' inside a name would split a frame: it becomes ':'.
  EXPECT_EQ(session.output(),
            "main 2\n"
            "main;a 2\n"
            "main;a;std::vector<int>::b() const 1\n"
            "main;c:semi 1\n"
            "main;c:semi;std::vector<int>::b() const 1\n");
}

TEST(FlameTest, CallsBeyondMaxDepthAreTruncated) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {{"max_depth", "2"}, kByCalls});
  ASSERT_EQ(session.init(), 0) << session.error();
  session.enter(kA);
  session.enter(kMain);
  session.enter(kD);
  session.enter(kA);
  session.leave(kA);
  session.leave(kD);
  session.enter(kD);  // after the pops, back at depth 2
  session.leave(kD);
  session.leave(kMain);
  session.leave(kA);
  session.enter(kD);
  session.leave(kD);
  ASSERT_EQ(session.report(), 0) << session.error();
  EXPECT_EQ(session.output(),
            "a 1\n"
            "a;main 1\n"
            "a;main;[truncated] 3\n"
            "d 1\n");
}

TEST(FlameTest, FullTableCountsAsLostAndPerThreadPrefixes) {
  use_symbols();
  // 4 slots, 3 usable: a, a;main, a;main;d fit, a;main;d;c does not.
  Session session(FTJIT_PLUGIN_FLAME_SO,
                  {{"table_size", "4"}, {"per_thread", "true"}, kByCalls});
  ASSERT_EQ(session.init(), 0) << session.error();
  fake_host::bind_thread(77, "loader");
  session.enter(kA);
  session.enter(kMain);
  session.enter(kD);
  session.enter(kC);
  session.enter(kB);  // under a lost stack: lost too
  session.leave(kB);
  session.leave(kC);
  session.leave(kD);
  session.leave(kMain);
  session.leave(kA);
  ASSERT_EQ(session.report(), 0) << session.error();
  EXPECT_EQ(session.output(),
            "loader-77;[table full] 2\n"
            "loader-77;a 1\n"
            "loader-77;a;main 1\n"
            "loader-77;a;main;d 1\n");
}

// By time (the default): each stack weighs its own time, callees' time
// excluded, so that the folded weights of a thread sum to the time of its
// outermost calls; an unwound frame's time ends at the unwind.
TEST(FlameTest, WeighsStacksByTheirOwnTime) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO);
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    fake_host::set_now(1000);
    session.enter(kMain);  // main: 1000 .. 2000
    fake_host::set_now(1100);
    session.enter(kA);     // a: 1100 .. 1400
    fake_host::set_now(1150);
    session.enter(kB);     // b: 1150 .. 1250, then 1300 .. 1350
    fake_host::set_now(1250);
    session.leave(kB);
    fake_host::set_now(1300);
    session.enter(kB);
    fake_host::set_now(1350);
    // An exception leaves b and a at 1350 and 1400: both unwound.
    session.leave(kB, 0, /*unwound=*/true);
    fake_host::set_now(1400);
    session.leave(kA, 0, /*unwound=*/true);
    fake_host::set_now(1500);
    session.enter(kC);     // c: 1500 .. 1900, its exit lost
    fake_host::set_now(1600);
    session.enter(kD);     // d: 1600 .. 1700
    fake_host::set_now(1700);
    session.leave(kD);
    fake_host::set_now(2000);
    // c's exit never came: main's ends it too, at 2000.
    session.leave(kMain);
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  // main 1000 - a 300 - c 500 = 200; a 300 - b 150 = 150; c 500 - d 100.
  EXPECT_EQ(session.output(),
            "main 200\n"
            "main;a 150\n"
            "main;a;std::vector<int>::b() const 150\n"
            "main;c:semi 400\n"
            "main;c:semi;d 100\n");
}

TEST(FlameTest, JsonByTimeGivesCallsTotalAndSelf) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    for (uint64_t start : {0, 10'000}) {
      fake_host::set_now(start);
      session.enter(kMain);
      fake_host::set_now(start + 100);
      session.enter(kD);
      fake_host::set_now(start + 400);
      session.leave(kD);
      fake_host::set_now(start + 1000);
      session.leave(kMain);
    }
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  EXPECT_EQ(json->get("unit")->text, "ns");
  const wire::Json &stacks = *json->get("stacks");
  ASSERT_EQ(stacks.items.size(), 2u);
  EXPECT_EQ(stacks.items[0].get("calls")->number, 2);
  EXPECT_EQ(stacks.items[0].get("total_ns")->number, 2000);
  EXPECT_EQ(stacks.items[0].get("self_ns")->number, 1400);
  EXPECT_EQ(stacks.items[1].get("total_ns")->number, 600);
  EXPECT_EQ(stacks.items[1].get("self_ns")->number, 600);
}

// The same weights in speedscope's format: one sample per stack, frames
// shared by index, outermost first.
TEST(FlameTest, SpeedscopeSamplesAreTheStacks) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {}, "speedscope");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] {
    fake_host::set_now(0);
    session.enter(kMain);
    fake_host::set_now(100);
    session.enter(kC);
    fake_host::set_now(400);
    session.leave(kC);
    fake_host::set_now(1000);
    session.leave(kMain);
  }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  const wire::Json &frames = *json->get("shared")->get("frames");
  ASSERT_EQ(frames.items.size(), 2u);
  EXPECT_EQ(frames.items[0].get("name")->text, "main");
  EXPECT_EQ(frames.items[1].get("name")->text, "c:semi");
  const wire::Json &profile = json->get("profiles")->items.at(0);
  EXPECT_EQ(profile.get("type")->text, "sampled");
  EXPECT_EQ(profile.get("unit")->text, "nanoseconds");
  EXPECT_EQ(profile.get("endValue")->number, 1000);
  const wire::Json &samples = *profile.get("samples");
  ASSERT_EQ(samples.items.size(), 2u);
  ASSERT_EQ(samples.items[1].items.size(), 2u);
  EXPECT_EQ(samples.items[1].items[0].number, 0);
  EXPECT_EQ(samples.items[1].items[1].number, 1);
  EXPECT_EQ(profile.get("weights")->items.at(0).number, 700);
  EXPECT_EQ(profile.get("weights")->items.at(1).number, 300);
}

// The SVG's frames: one per function per stack, names escaped for XML.
TEST(FlameTest, SvgHasAFramePerStackFrame) {
  fake_host::set_symbols({{kMain, "main"}, {kA, "a<int>&"}});
  Session session(FTJIT_PLUGIN_FLAME_SO, {kByCalls}, "svg");
  ASSERT_EQ(session.init(), 0) << session.error();
  session.enter(kMain);
  session.enter(kA);
  session.leave(kA);
  session.enter(kA);
  session.leave(kA);
  session.leave(kMain);
  ASSERT_EQ(session.report(), 0) << session.error();
  const std::string svg = session.output();
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("data-w=\"3\" data-d=\"0\" data-n=\"all\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-w=\"3\" data-d=\"1\" data-n=\"main\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-w=\"2\" data-d=\"2\" data-n=\"a&lt;int&gt;&amp;\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("a<int>"), std::string::npos);
  EXPECT_NE(svg.find("</script>\n</svg>\n"), std::string::npos);
}

TEST(FlameTest, JsonListsFramesOutermostFirst) {
  use_symbols();
  Session session(FTJIT_PLUGIN_FLAME_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  session.enter(kMain);
  session.enter(kD);
  session.leave(kD);
  session.leave(kMain);
  session.leave(kA);  // an exit without entry is counted, not popped
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  const wire::Json &stacks = *json->get("stacks");
  ASSERT_EQ(stacks.items.size(), 2u);
  const wire::Json &deepest = stacks.items[1];
  ASSERT_EQ(deepest.get("frames")->items.size(), 2u);
  EXPECT_EQ(deepest.get("frames")->items[0].text, "main");
  EXPECT_EQ(deepest.get("frames")->items[1].text, "d");
  EXPECT_EQ(deepest.get("calls")->number, 1);
  EXPECT_EQ(json->get("exits_without_entry")->number, 1);
}

TEST(FlameTest, InitRefusesBadOptions) {
  for (const auto &options :
       {std::map<std::string, std::string>{{"max_depth", "0"}},
        std::map<std::string, std::string>{{"max_depth", "257"}},
        std::map<std::string, std::string>{{"table_size", "6"}},
        std::map<std::string, std::string>{{"weight", "cycles"}}}) {
    Session session(FTJIT_PLUGIN_FLAME_SO, options);
    EXPECT_NE(session.init(), 0);
    EXPECT_NE(session.error().find(options.begin()->first), std::string::npos)
        << session.error();
  }
}

TEST(FlameTest, InstancesWithDifferentOptionsStayIndependent) {
  use_symbols();
  Session shallow(FTJIT_PLUGIN_FLAME_SO,
                  {{"max_depth", "1"}, {"per_thread", "true"}, kByCalls});
  Session full(FTJIT_PLUGIN_FLAME_SO, {kByCalls});
  ASSERT_EQ(shallow.init(), 0) << shallow.error();
  ASSERT_EQ(full.init(), 0) << full.error();
  fake_host::bind_thread(55, "fl");
  // Interleaved on one thread: each instance keeps its own stack.
  shallow.enter(kMain);
  full.enter(kMain);
  shallow.enter(kA);
  full.enter(kA);
  shallow.enter(kB);
  full.enter(kB);
  full.leave(kB);
  shallow.leave(kB);
  full.leave(kA);
  shallow.leave(kA);
  full.enter(kD);
  full.leave(kD);
  shallow.leave(kMain);
  full.leave(kMain);
  ASSERT_EQ(shallow.report(), 0) << shallow.error();
  ASSERT_EQ(full.report(), 0) << full.error();
  EXPECT_EQ(shallow.output(),
            "fl-55;main 1\n"
            "fl-55;main;[truncated] 2\n");
  EXPECT_EQ(full.output(),
            "main 1\n"
            "main;a 1\n"
            "main;a;std::vector<int>::b() const 1\n"
            "main;d 1\n");
}

TEST(FlameTest, InitRefusesAHostWithoutInstanceData) {
  for (const size_t size : {offsetof(ftjit_host, set_instance_data),
                            offsetof(ftjit_host, process_name)}) {
    Session session(FTJIT_PLUGIN_FLAME_SO, {}, "", 0,
                    fake_host::host_of_size(uint32_t(size)));
    EXPECT_NE(session.init(), 0) << size;
    EXPECT_NE(session.error().find("host is too old"), std::string::npos)
        << session.error();
  }
}

}  // namespace flame_test
