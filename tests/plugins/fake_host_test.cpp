// SPDX-License-Identifier: MIT
// The fake host itself: the services plugins rely on behave as the SDK
// header promises, so that plugin tests passing here mean something.
#include "fake_host.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

using fake_host::Session;

TEST(FakeHostTest, InstanceDataRoundTripsPerInstanceAndAcrossThreads) {
  // Not initialized: the plugin never sets its own pointer here.
  Session first(FTJIT_PLUGIN_COUNT_SO);
  Session second(FTJIT_PLUGIN_COUNT_SO);
  const ftjit_host *host = fake_host::host();
  EXPECT_EQ(host->instance_data(first.ctx()), nullptr);
  EXPECT_EQ(host->instance_data(second.ctx()), nullptr);
  int a = 0, b = 0;
  host->set_instance_data(first.ctx(), &a);
  host->set_instance_data(second.ctx(), &b);
  EXPECT_EQ(host->instance_data(first.ctx()), &a);
  EXPECT_EQ(host->instance_data(second.ctx()), &b);
  void *seen_first = nullptr, *seen_second = nullptr;
  std::thread([&] {
    seen_first = host->instance_data(first.ctx());
    seen_second = host->instance_data(second.ctx());
  }).join();
  EXPECT_EQ(seen_first, &a);
  EXPECT_EQ(seen_second, &b);
  host->set_instance_data(first.ctx(), nullptr);
  EXPECT_EQ(host->instance_data(first.ctx()), nullptr);
  EXPECT_EQ(host->instance_data(second.ctx()), &b);
}

TEST(FakeHostTest, PluginInitSetsItsInstanceData) {
  Session first(FTJIT_PLUGIN_LATENCY_SO);
  Session second(FTJIT_PLUGIN_LATENCY_SO);
  ASSERT_EQ(first.init(), 0) << first.error();
  ASSERT_EQ(second.init(), 0) << second.error();
  void *one = fake_host::host()->instance_data(first.ctx());
  void *two = fake_host::host()->instance_data(second.ctx());
  EXPECT_NE(one, nullptr);
  EXPECT_NE(two, nullptr);
  EXPECT_NE(one, two);
}

TEST(FakeHostTest, ProcessIsThisOneUnlessOverridden) {
  const ftjit_host *host = fake_host::host();
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  EXPECT_EQ(host->process_id(), int32_t(getpid()));
  EXPECT_EQ(std::string(host->process_name()), comm);
  const char *overridden = nullptr;
  {
    const fake_host::ProcessOverride process(77, "other");
    EXPECT_EQ(host->process_id(), 77);
    overridden = host->process_name();
    EXPECT_STREQ(overridden, "other");
  }
  EXPECT_EQ(host->process_id(), int32_t(getpid()));
  EXPECT_EQ(std::string(host->process_name()), comm);
  EXPECT_STREQ(overridden, "other");  // a plugin may have kept the pointer
}

TEST(FakeHostTest, OldHostOffersOnlyItsOwnMembers) {
  const uint32_t size = uint32_t(offsetof(ftjit_host, set_instance_data));
  const ftjit_host *old = fake_host::host_of_size(size);
  EXPECT_EQ(old->struct_size, size);
  EXPECT_EQ(old->abi_version, uint32_t(FTJIT_PLUGIN_ABI_VERSION));
  EXPECT_EQ(old->drop_counts, fake_host::host()->drop_counts);
  EXPECT_EQ(old->set_instance_data, nullptr);
  EXPECT_EQ(old->process_name, nullptr);
  EXPECT_EQ(fake_host::host()->struct_size, sizeof(ftjit_host));
}

}  // namespace
