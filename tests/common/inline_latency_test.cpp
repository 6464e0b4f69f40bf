// SPDX-License-Identifier: MIT
// Inline latency (ftjit_ops.inline_entry = FTJIT_INLINE_LATENCY), the same
// test on every ISA's leg: each site's own trampoline keeps the cycle
// counter on the shadow stack and the return adds the duration to the
// site's per-thread histogram. What it timed plus what the fallback
// callbacks timed is exactly the calls made, on one thread and on several,
// with signal handlers calling the same function, while threads come and
// go; histograms are read while threads run and after detach; detach gives
// the compiler's bytes back and no return stays hooked.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <ostream>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/common/inline_targets.h"
#if defined(__x86_64__)
#include <stdexcept>

#include "tests/e2e/traced.h"
#endif

void PrintTo(const InlineTarget& t, std::ostream* os);

namespace {

// The callbacks' half: a thread's first call, routes that call callbacks.
struct Timer {
  ftjit_ops ops;
  std::atomic<uint64_t> entries{0};
  std::atomic<uint64_t> exits{0};
  std::atomic<uint64_t> unwound{0};
  std::atomic<uint64_t> wrong_ip{0};
  std::atomic<uint64_t> not_turns{0};  // sampled: entries from elsewhere than a site's fallback
  uint64_t entry = 0;
};

void on_entry(uint64_t ip, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  auto* t = static_cast<Timer*>(ops->private_data);
  t->entries.fetch_add(1, std::memory_order_relaxed);
  if (ip != t->entry) t->wrong_ip.fetch_add(1, std::memory_order_relaxed);
  if (ftjit_inline_turn() == 0) t->not_turns.fetch_add(1, std::memory_order_relaxed);
}

void on_exit(uint64_t ip, uint64_t, ftjit_ops* ops, ftjit_ret_regs* ret) {
  auto* t = static_cast<Timer*>(ops->private_data);
  if (ret == nullptr) {
    t->unwound.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  t->exits.fetch_add(1, std::memory_order_relaxed);
  if (ip != t->entry) t->wrong_ip.fetch_add(1, std::memory_order_relaxed);
}

void init_timer(Timer* t, const InlineTarget& target, ftjit_strategy strategy) {
  ftjit_ops_init(&t->ops);
  t->ops.func = on_entry;
  t->ops.exit_func = on_exit;
  t->ops.private_data = t;
  t->ops.flags = FTJIT_OPS_F_NO_FP;
  t->ops.strategy = strategy;
  t->ops.inline_entry = FTJIT_INLINE_LATENCY;
  t->entry = target.entry;
}

struct Histograms {
  std::map<uint64_t, ftjit_inline_histogram> by_ip;
  bool consistent = true;  // calls == sum of buckets, max within total
};

void visit(const ftjit_inline_histogram* h, void* arg) {
  auto* r = static_cast<Histograms*>(arg);
  uint64_t sum = 0;
  for (uint64_t b : h->buckets) sum += b;
  if (sum != h->calls || h->max_ns > h->total_ns) r->consistent = false;
  r->by_ip[h->ip] = *h;
}

ftjit_inline_histogram read(ftjit_engine* engine, const Timer& t, long* sites = nullptr) {
  Histograms r;
  const long n = ftjit_inline_read_histograms(engine, &t.ops, visit, &r);
  if (sites != nullptr) *sites = n;
  EXPECT_TRUE(r.consistent);
  ftjit_inline_histogram h{};
  if (r.by_ip.count(t.entry)) h = r.by_ip[t.entry];
  return h;
}

std::vector<uint8_t> bytes_around(uint64_t entry) {
  std::vector<uint8_t> out(24);
  std::memcpy(out.data(), reinterpret_cast<const void*>(entry - 8), out.size());
  return out;
}

class InlineLatency : public ::testing::TestWithParam<InlineTarget> {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override { ftjit_engine_destroy(engine_); }
  ftjit_status attach(Timer* t) {
    const char* include[] = {GetParam().symbol};
    ftjit_filter f{include, 1, nullptr, 0};
    return ftjit_attach(engine_, &t->ops, &f);
  }
  ftjit_engine* engine_ = nullptr;
};

TEST_P(InlineLatency, TimesEveryCallMostlyInline) {
  const InlineTarget& target = GetParam();
  const auto before = bytes_around(target.entry);
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&t), FTJIT_OK) << ftjit_last_error();
  constexpr uint64_t kCalls = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < kCalls; ++i) ASSERT_EQ(target.call(i), target.expected(i));
  const uint64_t wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(ftjit_shadow_depth(), 0u);  // every hooked return came back
  const ftjit_inline_histogram live = read(engine_, t);
  EXPECT_EQ(live.calls + t.exits.load(), kCalls);
  EXPECT_EQ(t.entries.load(), t.exits.load());
  EXPECT_GE(live.calls, kCalls - 1);  // the first call made the thread's block
  // Durations of calls made inside the loop: their sum is within it.
  EXPECT_LE(live.total_ns, wall_ns);
  EXPECT_LE(live.max_ns, wall_ns);
  EXPECT_EQ(live.unwound, 0u);
  // The counts read through ftjit_inline_read are the calls timed.
  std::map<uint64_t, uint64_t> counts;
  ftjit_inline_read(
      engine_, &t.ops, [](uint64_t ip, uint64_t n, void* m) { (*static_cast<std::map<uint64_t, uint64_t>*>(m))[ip] += n; },
      &counts);
  EXPECT_EQ(counts[target.entry], live.calls);
  ASSERT_EQ(ftjit_detach(engine_, &t.ops), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(target.call(i), target.expected(i));
  long sites = 0;
  const ftjit_inline_histogram final_h = read(engine_, t, &sites);
  EXPECT_EQ(sites, 1);
  EXPECT_EQ(final_h.calls, live.calls);
  EXPECT_EQ(final_h.total_ns, live.total_ns);
  EXPECT_EQ(bytes_around(target.entry), before);
  EXPECT_EQ(t.wrong_ip.load(), 0u);
}

TEST_P(InlineLatency, FourThreadsAreTimedExactlyAndReadWhileTheyRun) {
  const InlineTarget& target = GetParam();
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_GENERATED);
  ASSERT_EQ(attach(&t), FTJIT_OK) << ftjit_last_error();
  constexpr int kThreads = 4;
  constexpr uint64_t kCalls = 100000;
  std::atomic<int> finished{0};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&] {
      for (uint64_t i = 0; i < kCalls; ++i) {
        if (target.call(static_cast<int64_t>(i)) != target.expected(static_cast<int64_t>(i))) bad.fetch_add(1);
      }
      if (ftjit_shadow_depth() != 0) bad.fetch_add(1);
      finished.fetch_add(1);
    });
  }
  uint64_t last = 0;
  while (finished.load() < kThreads) {
    const uint64_t now = read(engine_, t).calls + t.exits.load();
    EXPECT_GE(now, last);
    EXPECT_LE(now, kThreads * kCalls);
    last = now;
    std::this_thread::yield();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(read(engine_, t).calls + t.exits.load(), kThreads * kCalls);
  EXPECT_LE(t.exits.load(), uint64_t{kThreads});  // first calls only
  ASSERT_EQ(ftjit_detach(engine_, &t.ops), FTJIT_OK);
}

// Sampled (inline_sample = 7): each thread's calls 1, 8, 15... of the site
// are timed, by the code or (a thread's first, which makes its block) by
// the callbacks, which ftjit_inline_turn() tells so; the others are not.
// Threads making different numbers of calls, each its own turns.
TEST_P(InlineLatency, SampledTimesEachThreadsTurnsOnly) {
  const InlineTarget& target = GetParam();
  const auto before = bytes_around(target.entry);
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_GENERATED);
  constexpr uint32_t kPeriod = 7;
  t.ops.inline_sample = kPeriod;
  ASSERT_EQ(attach(&t), FTJIT_OK) << ftjit_last_error();
  constexpr int kThreads = 4;
  std::atomic<uint64_t> bad{0};
  uint64_t want = 0;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    const uint64_t calls = 10000 + static_cast<uint64_t>(k) * 3;  // 1429, 1429, 1429, 1430 turns
    want += (calls + kPeriod - 1) / kPeriod;
    threads.emplace_back([&, calls] {
      for (uint64_t i = 0; i < calls; ++i) {
        if (target.call(static_cast<int64_t>(i)) != target.expected(static_cast<int64_t>(i))) bad.fetch_add(1);
      }
      if (ftjit_shadow_depth() != 0) bad.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  const ftjit_inline_histogram h = read(engine_, t);
  EXPECT_EQ(h.calls + t.exits.load(), want);
  EXPECT_EQ(t.entries.load(), t.exits.load());
  EXPECT_LE(t.exits.load(), uint64_t{kThreads});  // first calls only
  EXPECT_EQ(t.not_turns.load(), 0u);
  ASSERT_EQ(ftjit_detach(engine_, &t.ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(bytes_around(target.entry), before);
  EXPECT_EQ(t.wrong_ip.load(), 0u);
}

// inline_sample is latency's, and bounded.
TEST_P(InlineLatency, SamplingIsRefusedToCountAndBeyondItsBound) {
  const InlineTarget& target = GetParam();
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_GENERATED);
  t.ops.inline_sample = (1u << 30) + 1;
  EXPECT_EQ(attach(&t), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ftjit_last_error()).find("inline_sample"), std::string::npos) << ftjit_last_error();
  Timer c;
  init_timer(&c, target, FTJIT_STRATEGY_GENERATED);
  c.ops.exit_func = nullptr;
  c.ops.inline_entry = FTJIT_INLINE_COUNT;
  c.ops.inline_sample = 2;
  EXPECT_EQ(attach(&c), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ftjit_last_error()).find("inline_sample"), std::string::npos) << ftjit_last_error();
}

// Signal handlers calling the traced function on the thread that calls it
// too, landing anywhere, inside the inline trampoline and the landing
// among other places: every call is timed once, by the inline path or the
// callbacks, or dropped as made under a callback (recursion_drops).
std::atomic<const InlineTarget*> g_target{nullptr};
std::atomic<uint64_t> g_handler_calls{0};
void call_from_handler(int) {
  const InlineTarget* t = g_target.load();
  for (int i = 0; i < 3; ++i) t->call(i);
  g_handler_calls.fetch_add(3);
}

TEST_P(InlineLatency, SignalHandlersCallingTheSiteLoseNoCall) {
  const InlineTarget& target = GetParam();
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&t), FTJIT_OK) << ftjit_last_error();
  g_target = &target;
  g_handler_calls = 0;
  ftjit_stats s0;
  ftjit_get_stats(engine_, &s0);
  struct sigaction sa {}, old{};
  sa.sa_handler = call_from_handler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  const pthread_t caller = pthread_self();
  std::atomic<bool> stop{false};
  std::thread signaller([&] {
    while (!stop.load()) {
      pthread_kill(caller, SIGUSR2);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  uint64_t calls = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls < 200000 || (g_handler_calls.load() < 600 && std::chrono::steady_clock::now() < give_up)) {
    if (target.call(static_cast<int64_t>(calls)) != target.expected(static_cast<int64_t>(calls))) break;
    ++calls;
  }
  stop = true;
  signaller.join();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
  EXPECT_GT(g_handler_calls.load(), 0u);
  ftjit_stats s1;
  ftjit_get_stats(engine_, &s1);
  EXPECT_EQ(read(engine_, t).calls + t.exits.load() + (s1.recursion_drops - s0.recursion_drops),
            calls + g_handler_calls.load());
  ASSERT_EQ(ftjit_detach(engine_, &t.ops), FTJIT_OK);
}

TEST_P(InlineLatency, AttachDetachWhileFourThreadsCall) {
  const InlineTarget& target = GetParam();
  const auto before = bytes_around(target.entry);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        if (target.call(i) != target.expected(i)) bad.fetch_add(1);
      }
      if (ftjit_shadow_depth() != 0) bad.fetch_add(1);
    });
  }
  for (int round = 0; round < 16; ++round) {
    Timer t;
    init_timer(&t, target, round % 2 ? FTJIT_STRATEGY_AUTO : FTJIT_STRATEGY_GENERATED);
    ASSERT_EQ(attach(&t), FTJIT_OK) << ftjit_last_error();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (read(engine_, t).calls + t.exits.load() < 1000 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(ftjit_detach(engine_, &t.ops), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(t.wrong_ip.load(), 0u);
    EXPECT_GT(read(engine_, t).calls + t.exits.load(), 0u);
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(bytes_around(target.entry), before);
}

// Shared with another ops, the site calls the callbacks, which time it.
TEST_P(InlineLatency, SharedSitesAreTimedByTheCallbacks) {
  const InlineTarget& target = GetParam();
  Timer a, b;
  init_timer(&a, target, FTJIT_STRATEGY_AUTO);
  init_timer(&b, target, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&a), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 10; ++i) target.call(i);   // a alone: inline
  ASSERT_EQ(attach(&b), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 20; ++i) target.call(i);   // shared: callbacks
  ASSERT_EQ(ftjit_detach(engine_, &b.ops), FTJIT_OK);
  for (int i = 0; i < 30; ++i) target.call(i);   // a alone again
  EXPECT_EQ(read(engine_, a).calls + a.exits.load(), 60u);
  EXPECT_GE(a.exits.load(), 20u);
  EXPECT_EQ(read(engine_, b).calls + b.exits.load(), 20u);
  ASSERT_EQ(ftjit_detach(engine_, &a.ops), FTJIT_OK);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
}

TEST_P(InlineLatency, WithoutAnExitCallbackOrWithAThreadFilterIsRefused) {
  const InlineTarget& target = GetParam();
  const auto before = bytes_around(target.entry);
  Timer t;
  init_timer(&t, target, FTJIT_STRATEGY_AUTO);
  t.ops.exit_func = nullptr;
  EXPECT_EQ(attach(&t), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ftjit_last_error(), "exit callback"), nullptr) << ftjit_last_error();
  init_timer(&t, target, FTJIT_STRATEGY_AUTO);
  ftjit_thread_filter only_me{};
  only_me.main_thread = 1;
  t.ops.threads = &only_me;
  EXPECT_EQ(attach(&t), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ftjit_last_error(), "thread filter"), nullptr) << ftjit_last_error();
  EXPECT_EQ(bytes_around(target.entry), before);
  Histograms r;
  EXPECT_EQ(ftjit_inline_read_histograms(engine_, &t.ops, visit, &r), -1);
}

#if defined(__x86_64__)
// Exceptions through a frame whose return the inline trampoline hooked:
// the unwinder sees the real return address, the frame is counted
// unwound (not timed), and the calls after it are timed again.
[[noreturn]] void throw_value(int v) { throw std::runtime_error(std::to_string(v)); }
void no_throw(int) {}

TEST(InlineLatencyUnwind, ExceptionsThroughHookedFramesAreCountedUnwound) {
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  Timer t;
  const InlineTarget target{"x86", "traced_throw_through", reinterpret_cast<uint64_t>(&traced_throw_through),
                            nullptr, nullptr};
  init_timer(&t, target, FTJIT_STRATEGY_AUTO);
  const char* include[] = {"traced_throw_through"};
  ftjit_filter f{include, 1, nullptr, 0};
  ASSERT_EQ(ftjit_attach(engine, &t.ops, &f), FTJIT_OK) << ftjit_last_error();
  constexpr int kThrows = 50, kReturns = 70;
  int caught = 0;
  for (int i = 0; i < kThrows; ++i) {
    try {
      traced_throw_through(i, throw_value);
    } catch (const std::runtime_error& e) {
      if (std::to_string(i) == e.what()) ++caught;
    }
    traced_throw_through(i, no_throw);
    if (i < kReturns - kThrows) traced_throw_through(i, no_throw);
  }
  EXPECT_EQ(caught, kThrows);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
  const ftjit_inline_histogram h = read(engine, t);
  EXPECT_EQ(h.unwound + t.unwound.load(), uint64_t{kThrows});
  EXPECT_EQ(h.calls + t.exits.load(), uint64_t{kReturns});
  EXPECT_GT(h.unwound, 0u);
  ASSERT_EQ(ftjit_detach(engine, &t.ops), FTJIT_OK);
  ftjit_engine_destroy(engine);
}
#endif

INSTANTIATE_TEST_SUITE_P(Layouts, InlineLatency, ::testing::ValuesIn(inline_targets()),
                         [](const ::testing::TestParamInfo<InlineTarget>& info) {
                           return std::string(info.param.layout);
                         });

}  // namespace
