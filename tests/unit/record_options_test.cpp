// SPDX-License-Identifier: MIT
// The record options as `ftjit run` and `ftjit attach` parse them
// (cli/record_options.h): what each accepts, and the one line it says
// about what it refuses.
#include <gtest/gtest.h>
#include <signal.h>

#include "cli/record_options.h"

namespace ftjit::cli {
namespace {

TEST(RecordOptions, TimesNeedTheirUnit) {
  uint64_t ns = 0;
  EXPECT_TRUE(parse_time_ns("10us", &ns));
  EXPECT_EQ(ns, 10'000u);
  EXPECT_TRUE(parse_time_ns("1.5ms", &ns));
  EXPECT_EQ(ns, 1'500'000u);
  EXPECT_TRUE(parse_time_ns("2s", &ns));
  EXPECT_EQ(ns, 2'000'000'000u);
  EXPECT_TRUE(parse_time_ns("250ns", &ns));
  EXPECT_EQ(ns, 250u);
  for (const char* bad : {"10", "", "us", "-1ms", "0s", "1e999s", "10 us", "3h", "0.1ns", "400d"}) {
    EXPECT_FALSE(parse_time_ns(bad, &ns)) << bad;
  }
}

TEST(RecordOptions, Triggers) {
  auto t = parse_trigger("--start-at", "handle@return#3");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->function, "handle");
  EXPECT_TRUE(t->at_return);
  EXPECT_EQ(t->from_call, 3u);
  t = parse_trigger("--stop-at", "libc.so.6!mall*@entry");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->function, "libc.so.6!mall*");
  EXPECT_FALSE(t->at_return);
  EXPECT_EQ(t->from_call, 1u);
  for (const char* bad : {"", "@return", "f@exit", "f#0", "f#x", "f#-2"}) {
    auto r = parse_trigger("--start-at", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("--start-at"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(RecordOptions, Signals) {
  EXPECT_EQ(parse_signal("USR2"), SIGUSR2);
  EXPECT_EQ(parse_signal("SIGUSR1"), SIGUSR1);
  EXPECT_EQ(parse_signal("12"), 12);
  EXPECT_EQ(parse_signal("RTMIN+3"), SIGRTMIN + 3);
  EXPECT_EQ(parse_signal("SIGRTMAX"), SIGRTMAX);
  for (const char* bad : {"KILL", "STOP", "SEGV", "9", "0", "99", "FOO", "", "RTMIN+x"}) {
    EXPECT_EQ(parse_signal(bad), 0) << bad;
  }
}

TEST(RecordOptions, WholeSetAndItsRefusals) {
  RecordOptions o;
  o.depth = "3";
  o.sample = "1/10";
  o.min_duration = "5ms";
  o.start_at = {"a"};
  o.stop_at = {"b@return"};
  o.dump_at = {"c#2"};
  o.on_signal = "USR2:dump";
  auto r = parse_record_options(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_depth, 3u);
  EXPECT_EQ(r->sample_period, 10u);
  EXPECT_EQ(r->min_duration_ns, 5'000'000u);
  ASSERT_EQ(r->triggers.size(), 3u);
  EXPECT_EQ(r->triggers[2].action, TriggerAction::kDump);
  EXPECT_EQ(r->signal, SIGUSR2);
  EXPECT_EQ(r->signal_action, TriggerAction::kDump);
  EXPECT_TRUE(r->starts_off());

  struct Case {
    RecordOptions o;
    const char* words;
  };
  RecordOptions depth0, sample0, same, times, action;
  depth0.depth = "0";
  sample0.sample = "0";
  same.start_at = {"f"};
  same.stop_at = {"f"};
  times.start_after = "2s";
  times.stop_after = "1s";
  action.on_signal = "USR2:pause";
  for (const Case& c : {Case{depth0, "--depth 0"}, Case{sample0, "--sample 0"}, Case{same, "the same call"},
                        Case{times, "--stop-after"}, Case{action, "'pause' is not an action"}}) {
    auto bad = parse_record_options(c.o);
    ASSERT_FALSE(bad.ok()) << c.words;
    EXPECT_NE(bad.error().message.find(c.words), std::string::npos) << bad.error().message;
  }
}

}  // namespace
}  // namespace ftjit::cli
