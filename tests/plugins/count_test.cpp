// SPDX-License-Identifier: MIT
// count plugin against the fake host: merged counts, formats, overflow,
// option checks, and the cost of its entry callback.
#include "fake_host.h"
#include "wire_readers.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <map>
#include <thread>

#include <dlfcn.h>

namespace {

using fake_host::Session;

constexpr uint64_t kAlpha = 0x401000, kBeta = 0x402000, kGamma = 0x403000,
                   kNameless = 0x404000, kDelta = 0x405000;

class CountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_host::set_symbols({{kAlpha, "alpha"},
                            {kBeta, "beta"},
                            {kGamma, "ns::gamma(int)"},
                            {kDelta, "delta"}});
  }
  static void call(Session &session, uint64_t ip, int times) {
    for (int i = 0; i < times; ++i) session.enter(ip);
  }
};

TEST_F(CountTest, DescriptorFollowsTheContract) {
  Session session(FTJIT_PLUGIN_COUNT_SO);
  const ftjit_plugin &plugin = session.plugin();
  EXPECT_EQ(plugin.struct_size, sizeof(ftjit_plugin));
  EXPECT_STREQ(plugin.name, "count");
  EXPECT_STREQ(plugin.formats[0], "text");
  EXPECT_STREQ(plugin.formats[1], "json");
  EXPECT_STREQ(plugin.formats[2], "tsv");
  EXPECT_EQ(plugin.formats[3], nullptr);
  EXPECT_NE(plugin.entry, nullptr);
  EXPECT_EQ(plugin.exit, nullptr);  // no exit hook: the cheapest trampoline
  for (uint32_t i = 0; i < plugin.n_options; ++i) {
    EXPECT_NE(plugin.options[i].help, nullptr);
    EXPECT_NE(plugin.options[i].default_value, nullptr);
  }
  // Only the entry point is exported.
  void *library = dlopen(FTJIT_PLUGIN_COUNT_SO, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(dlsym(library, "_ZN11ftjit_count6g_hostE"), nullptr);
  dlclose(library);
}

TEST_F(CountTest, TsvIsOneSortedLinePerFunctionMergedAcrossThreads) {
  Session session(FTJIT_PLUGIN_COUNT_SO, {}, "tsv");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread first([&] {
    call(session, kAlpha, 5);
    call(session, kBeta, 2);
  });
  first.join();
  std::thread second([&] {
    call(session, kAlpha, 3);
    call(session, kGamma, 2);
    call(session, kNameless, 1);
  });
  second.join();
  session.set_recursion_drops(9);  // must not show in tsv
  ASSERT_EQ(session.report(), 0) << session.error();
  // Ties (beta, gamma) go by name; an ip without a symbol prints as hex.
  EXPECT_EQ(session.output(),
            "alpha\t8\n"
            "beta\t2\n"
            "ns::gamma(int)\t2\n"
            "0x404000\t1\n");
}

// Calls the engine counted inline (in the code the sites call) add to
// those the callback counted, per function; a host without the service
// (older SDK) leaves the callback's counts alone.
TEST_F(CountTest, InlineCountsAddToTheCallbacks) {
  {
    Session session(FTJIT_PLUGIN_COUNT_SO, {}, "tsv");
    ASSERT_EQ(session.init(), 0) << session.error();
    ASSERT_NE(session.plugin().inline_work, nullptr);
    EXPECT_EQ(session.plugin().inline_work->entry, uint32_t{FTJIT_PLUGIN_INLINE_COUNT});
    call(session, kAlpha, 1);  // a thread's first call: the callback
    call(session, kBeta, 2);
    session.set_inline_counts({{kAlpha, 999}, {kGamma, 5}});
    ASSERT_EQ(session.report(), 0) << session.error();
    EXPECT_EQ(session.output(),
              "alpha\t1000\n"
              "ns::gamma(int)\t5\n"
              "beta\t2\n");
  }
  {
    const ftjit_host *old = fake_host::host_of_size(offsetof(ftjit_host, inline_counts));
    Session session(FTJIT_PLUGIN_COUNT_SO, {}, "tsv", 0, old);
    ASSERT_EQ(session.init(), 0) << session.error();
    call(session, kAlpha, 3);
    session.set_inline_counts({{kAlpha, 999}});
    ASSERT_EQ(session.report(), 0) << session.error();
    EXPECT_EQ(session.output(), "alpha\t3\n");
  }
}

TEST_F(CountTest, TextShowsHeaderTopAndDrops) {
  Session session(FTJIT_PLUGIN_COUNT_SO, {{"top", "2"}}, "text");
  ASSERT_EQ(session.init(), 0) << session.error();
  call(session, kAlpha, 3);
  call(session, kBeta, 12);
  call(session, kGamma, 1);
  session.set_recursion_drops(4);
  ASSERT_EQ(session.report(), 0) << session.error();
  EXPECT_EQ(session.output(),
            "         CALLS  FUNCTION\n"
            "            12  beta\n"
            "             3  alpha\n"
            "           ...  (1 more functions)\n"
            "\n"
            "16 calls of 3 functions\n"
            "dropped: 4 calls made inside tracer callbacks (untraced)\n");
}

TEST_F(CountTest, FullTableCountsIntoOther) {
  // 4 slots, 3 usable: the fourth and fifth distinct functions are 'other'.
  Session session(FTJIT_PLUGIN_COUNT_SO, {{"table_size", "4"}}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  call(session, kAlpha, 2);
  call(session, kBeta, 1);
  call(session, kGamma, 1);
  call(session, kDelta, 3);
  call(session, kNameless, 1);
  call(session, kAlpha, 1);  // known functions still count when full
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << session.output();
  const wire::Json *functions = json->get("functions");
  ASSERT_NE(functions, nullptr);
  ASSERT_EQ(functions->items.size(), 3u);
  EXPECT_EQ(functions->items[0].get("name")->text, "alpha");
  EXPECT_EQ(functions->items[0].get("calls")->number, 3);
  EXPECT_EQ(json->get("total_calls")->number, 5);
  EXPECT_EQ(json->get("other_calls")->number, 4);
}

TEST_F(CountTest, ThreadsBeyondMaxThreadsCountAsOther) {
  Session session(FTJIT_PLUGIN_COUNT_SO, {{"max_threads", "1"}}, "text");
  ASSERT_EQ(session.init(), 0) << session.error();
  std::thread([&] { call(session, kAlpha, 2); }).join();
  std::thread([&] { call(session, kBeta, 5); }).join();
  ASSERT_EQ(session.report(), 0) << session.error();
  const std::string text = session.output();
  EXPECT_NE(text.find("             2  alpha\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("beta"), std::string::npos) << text;
  EXPECT_NE(text.find("other: 5 calls not attributed"), std::string::npos)
      << text;
}

TEST_F(CountTest, JsonCarriesDropCounts) {
  Session session(FTJIT_PLUGIN_COUNT_SO, {}, "json");
  ASSERT_EQ(session.init(), 0) << session.error();
  call(session, kGamma, 1);
  session.set_recursion_drops(7);
  ASSERT_EQ(session.report(), 0) << session.error();
  std::string error;
  auto json = wire::parse_json(session.output(), &error);
  ASSERT_TRUE(json) << error;
  EXPECT_EQ(json->get("dropped")->get("recursion")->number, 7);
  EXPECT_EQ(json->get("dropped")->get("events")->number, 0);
  EXPECT_EQ(json->get("functions")->items[0].get("name")->text,
            "ns::gamma(int)");
  EXPECT_EQ(json->get("functions")->items[0].get("ip")->text, "0x403000");
}

TEST_F(CountTest, InitRefusesBadOptions) {
  const std::map<std::string, std::string> bad[] = {
      {{"table_size", "3"}}, {{"table_size", "0"}}, {{"table_size", "-8"}},
      {{"max_threads", "0"}}, {{"top", "-1"}}};
  for (const auto &options : bad) {
    Session session(FTJIT_PLUGIN_COUNT_SO, options);
    EXPECT_NE(session.init(), 0) << options.begin()->first;
    EXPECT_NE(session.error().find(options.begin()->first), std::string::npos)
        << session.error();
  }
}

TEST_F(CountTest, InstancesWithDifferentOptionsStayIndependent) {
  Session small(FTJIT_PLUGIN_COUNT_SO, {{"table_size", "4"}}, "json");
  Session top(FTJIT_PLUGIN_COUNT_SO, {{"top", "1"}}, "text");
  ASSERT_EQ(small.init(), 0) << small.error();
  ASSERT_EQ(top.init(), 0) << top.error();
  // Interleaved on one thread: each instance has its own table and limits.
  call(small, kAlpha, 2);
  call(top, kBeta, 3);
  call(small, kBeta, 1);
  call(small, kGamma, 1);
  call(small, kDelta, 2);  // the fourth function: 'other' in small only
  call(top, kAlpha, 1);
  ASSERT_EQ(small.report(), 0) << small.error();
  ASSERT_EQ(top.report(), 0) << top.error();
  std::string error;
  auto json = wire::parse_json(small.output(), &error);
  ASSERT_TRUE(json) << error << "\n" << small.output();
  ASSERT_EQ(json->get("functions")->items.size(), 3u);
  EXPECT_EQ(json->get("functions")->items[0].get("name")->text, "alpha");
  EXPECT_EQ(json->get("functions")->items[0].get("calls")->number, 2);
  EXPECT_EQ(json->get("total_calls")->number, 4);
  EXPECT_EQ(json->get("other_calls")->number, 2);
  EXPECT_EQ(top.output(),
            "         CALLS  FUNCTION\n"
            "             3  beta\n"
            "           ...  (1 more functions)\n"
            "\n"
            "4 calls of 2 functions\n"
            "dropped: 0 calls made inside tracer callbacks (untraced)\n");
}

TEST_F(CountTest, InitRefusesAHostWithoutInstanceData) {
  for (const size_t size : {offsetof(ftjit_host, set_instance_data),
                            offsetof(ftjit_host, process_name)}) {
    Session session(FTJIT_PLUGIN_COUNT_SO, {}, "",
                    0, fake_host::host_of_size(uint32_t(size)));
    EXPECT_NE(session.init(), 0) << size;
    EXPECT_NE(session.error().find("host is too old"), std::string::npos)
        << session.error();
  }
}

}  // namespace
