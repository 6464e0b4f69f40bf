// SPDX-License-Identifier: MIT
// The lifecycle and report helpers the built-in plugins share
// (plugins/common/plugin_support.h), against a minimal host of their own.
// The event-path helpers (event_support.h) are built FP-free only, so the
// plugin tests cover them through the plugins.
#include "plugin_support.h"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>

namespace {

namespace support = ftjit_plugin_support;

std::string g_error;
std::map<std::string, int64_t> g_ints;
void *g_instance_data = nullptr;

void set_error(ftjit_plugin_ctx *, const char *fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  g_error = text;
}
int64_t option_int(ftjit_plugin_ctx *, const char *name) {
  auto it = g_ints.find(name);
  return it == g_ints.end() ? 0 : it->second;
}
const char *symbol(ftjit_plugin_ctx *, uint64_t ip) {
  return ip == 0x10 ? "known" : ip == 0x20 ? "" : nullptr;
}
void set_instance_data(ftjit_plugin_ctx *, void *data) { g_instance_data = data; }
void *instance_data(ftjit_plugin_ctx *) { return g_instance_data; }

ftjit_host make_host() {
  ftjit_host host{};
  host.struct_size = sizeof(ftjit_host);
  host.abi_version = FTJIT_PLUGIN_ABI_VERSION;
  host.set_error = set_error;
  host.option_int = option_int;
  host.symbol = symbol;
  host.set_instance_data = set_instance_data;
  host.instance_data = instance_data;
  return host;
}

struct Entry {
  uint64_t ip;
};
struct Header {
  uint64_t overflow;
  uint32_t used;
};
struct Instance : support::TablePool<Entry, Header> {};

class PluginSupportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_error.clear();
    g_ints.clear();
    g_instance_data = nullptr;
  }
  ftjit_host host_ = make_host();
  ftjit_plugin_ctx *ctx_ = nullptr;
};

TEST_F(PluginSupportTest, AcceptHostChecksTheAbi) {
  const ftjit_plugin descriptor = support::no_fp_descriptor({.name = "x"});
  EXPECT_EQ(descriptor.struct_size, sizeof(ftjit_plugin));
  EXPECT_EQ(descriptor.abi_version, uint32_t(FTJIT_PLUGIN_ABI_VERSION));
  EXPECT_EQ(descriptor.flags, FTJIT_PLUGIN_F_NO_FP);
  const ftjit_host *kept = nullptr;
  EXPECT_EQ(support::accept_host(nullptr, kept, descriptor), nullptr);
  ftjit_host other = host_;
  other.abi_version = FTJIT_PLUGIN_ABI_VERSION + 1;
  EXPECT_EQ(support::accept_host(&other, kept, descriptor), nullptr);
  EXPECT_EQ(kept, nullptr);
  EXPECT_EQ(support::accept_host(&host_, kept, descriptor), &descriptor);
  EXPECT_EQ(kept, &host_);
}

TEST_F(PluginSupportTest, HostTooOld) {
  EXPECT_FALSE(support::host_too_old(&host_, ctx_, "p"));
  EXPECT_EQ(g_error, "");
  host_.struct_size = uint32_t(offsetof(ftjit_host, instance_data));
  EXPECT_TRUE(support::host_too_old(&host_, ctx_, "p"));
  EXPECT_EQ(g_error.rfind("p: the host is too old (ftjit_host of ", 0), 0u)
      << g_error;
}

TEST_F(PluginSupportTest, PoolOptionsAreChecked) {
  support::PoolOptions options;
  g_ints = {{"table_size", 1000}, {"max_threads", 4}};
  EXPECT_FALSE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  EXPECT_EQ(g_error, "p: table_size must be a power of two in [1, 1024], got 1000");
  g_ints = {{"table_size", 2048}, {"max_threads", 4}};
  EXPECT_FALSE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  g_ints = {{"table_size", 0}, {"max_threads", 4}};
  EXPECT_FALSE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  g_ints = {{"table_size", 64}, {"max_threads", 0}};
  EXPECT_FALSE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  EXPECT_EQ(g_error, "p: max_threads must be in [1, 65536], got 0");
  g_ints = {{"table_size", 64}, {"max_threads", 65537}};
  EXPECT_FALSE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  g_ints = {{"table_size", 1024}, {"max_threads", 65536}};
  EXPECT_TRUE(support::read_pool_options(&host_, ctx_, "p", 1024, &options));
  EXPECT_EQ(options.table_size, 1024);
  EXPECT_EQ(options.max_threads, 65536);
}

TEST_F(PluginSupportTest, NewPoolInstanceSizesThePool) {
  Instance *instance = support::new_pool_instance<Instance>(
      &host_, ctx_, "p", {.table_size = 16, .max_threads = 3}, "entries");
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(instance->table_size, 16u);
  EXPECT_EQ(instance->hash_shift, 60u);
  EXPECT_EQ(instance->load_limit, 12u);
  EXPECT_EQ(instance->max_threads, 3u);
  ASSERT_NE(instance->entries, nullptr);
  ASSERT_NE(instance->headers, nullptr);
  EXPECT_EQ(instance->entries[3 * 16 - 1].ip, 0u);  // zeroed, all of it
  EXPECT_EQ(instance->headers[2].used, 0u);
  support::delete_pool_instance(instance);

  // One entry: the shift stays below 64, one entry stays empty.
  instance = support::new_pool_instance<Instance>(
      &host_, ctx_, "p", {.table_size = 1, .max_threads = 1}, "entries");
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(instance->hash_shift, 63u);
  EXPECT_EQ(instance->load_limit, 0u);
  support::delete_pool_instance(instance);
  support::delete_pool_instance<Instance>(nullptr);
}

TEST_F(PluginSupportTest, TakeInstanceClearsIt) {
  int data = 0;
  EXPECT_EQ(support::take_instance<int>(&host_, ctx_), nullptr);
  g_instance_data = &data;
  EXPECT_EQ(support::take_instance<int>(&host_, ctx_), &data);
  EXPECT_EQ(g_instance_data, nullptr);
}

TEST_F(PluginSupportTest, GuardedReport) {
  int instance = 0;
  EXPECT_FALSE(support::has_instance(&host_, ctx_, "p", nullptr));
  EXPECT_EQ(g_error, "p: report without a successful init");
  EXPECT_TRUE(support::has_instance(&host_, ctx_, "p", &instance));

  FILE *out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  g_error.clear();
  EXPECT_EQ(support::guarded_report(&host_, ctx_, "p", out, [] { return 0; }), 0);
  EXPECT_EQ(g_error, "");
  EXPECT_EQ(support::guarded_report(&host_, ctx_, "p", out, [] { return 1; }), 1);
  EXPECT_EQ(support::guarded_report(&host_, ctx_, "p", out, []() -> int {
              throw std::bad_alloc();
            }), 1);
  EXPECT_EQ(g_error, "p: out of memory while reporting");
  std::fclose(out);

  FILE *read_only = std::fopen("/dev/null", "r");
  ASSERT_NE(read_only, nullptr);
  g_error.clear();
  EXPECT_EQ(support::guarded_report(&host_, ctx_, "p", read_only, [&] {
              std::fputs("x", read_only);
              std::fflush(read_only);
              return 0;
            }), 1);
  EXPECT_EQ(g_error, "p: write failed");
  std::fclose(read_only);
}

TEST_F(PluginSupportTest, SymbolOrHex) {
  EXPECT_EQ(support::symbol_or_hex(&host_, ctx_, 0x10), "known");
  EXPECT_EQ(support::symbol_or_hex(&host_, ctx_, 0x20), "0x20");
  EXPECT_EQ(support::symbol_or_hex(&host_, ctx_, 0xabc), "0xabc");
}

TEST_F(PluginSupportTest, JsonQuote) {
  EXPECT_EQ(support::json_quote(""), "\"\"");
  EXPECT_EQ(support::json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(support::json_quote(std::string("\n\t\x01\0x", 5)),
            "\"\\u000a\\u0009\\u0001\\u0000x\"");
  EXPECT_EQ(support::json_quote("caf\xc3\xa9 ~"), "\"caf\xc3\xa9 ~\"");

  FILE *out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  support::write_json_string(out, std::string("q\"\0", 3));
  std::rewind(out);
  char text[32] = {};
  const size_t n = std::fread(text, 1, sizeof text - 1, out);
  std::fclose(out);
  EXPECT_EQ(std::string(text, n), "\"q\\\"\\u0000\"");
}

}  // namespace
