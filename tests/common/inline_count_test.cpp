// SPDX-License-Identifier: MIT
// Inline work (ftjit_ops.inline_entry = FTJIT_INLINE_COUNT), the same test
// on every ISA's leg: the count is compiled into each site's own
// trampoline, and what it counts plus what the fallback callback counted
// is exactly the calls made, on one thread and on several, with signal
// handlers calling the same function, while other threads come and go;
// counts are read while threads run and after detach; detach gives the
// compiler's bytes back; what cannot be compiled or combined is refused.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ostream>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/common/inline_targets.h"

// Test names say the layout, not the bytes of the parameter (found by
// argument-dependent lookup: InlineTarget's namespace).
void PrintTo(const InlineTarget& t, std::ostream* os) { *os << t.layout << " " << t.symbol; }

namespace {

// The callback half: what the engine does not count inline (a thread's
// first call, routes that call callbacks) is counted here.
struct Counter {
  ftjit_ops ops;
  std::atomic<uint64_t> callback_calls{0};
  std::atomic<uint64_t> wrong_ip{0};
  uint64_t entry = 0;
};

void count_callback(uint64_t ip, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  auto* c = static_cast<Counter*>(ops->private_data);
  c->callback_calls.fetch_add(1, std::memory_order_relaxed);
  if (ip != c->entry) c->wrong_ip.fetch_add(1, std::memory_order_relaxed);
}

void init_counter(Counter* c, const InlineTarget& t, ftjit_strategy strategy) {
  ftjit_ops_init(&c->ops);
  c->ops.func = count_callback;
  c->ops.private_data = c;
  c->ops.flags = FTJIT_OPS_F_NO_FP;
  c->ops.strategy = strategy;
  c->ops.inline_entry = FTJIT_INLINE_COUNT;
  c->entry = t.entry;
}

struct Read {
  std::map<uint64_t, uint64_t> counts;
};

void visit(uint64_t ip, uint64_t count, void* arg) { static_cast<Read*>(arg)->counts[ip] += count; }

// What the engine counted inline for `c`, at `entry`.
uint64_t inline_count(ftjit_engine* engine, const Counter& c, uint64_t entry, long* sites = nullptr) {
  Read r;
  const long n = ftjit_inline_read(engine, &c.ops, visit, &r);
  if (sites != nullptr) *sites = n;
  return r.counts.count(entry) ? r.counts[entry] : 0;
}

std::vector<uint8_t> bytes_around(uint64_t entry) {
  std::vector<uint8_t> out(24);
  std::memcpy(out.data(), reinterpret_cast<const void*>(entry - 8), out.size());
  return out;
}

class InlineCount : public ::testing::TestWithParam<InlineTarget> {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override { ftjit_engine_destroy(engine_); }
  ftjit_status attach(Counter* c) {
    const char* include[] = {GetParam().symbol};
    ftjit_filter f{include, 1, nullptr, 0};
    return ftjit_attach(engine_, &c->ops, &f);
  }
  ftjit_engine* engine_ = nullptr;
};

TEST_P(InlineCount, CountsEveryCallMostlyInline) {
  const InlineTarget& t = GetParam();
  const auto before = bytes_around(t.entry);
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_AUTO);
  ftjit_stats s0;
  ftjit_get_stats(engine_, &s0);
  ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
  constexpr int kCalls = 1000;
  for (int i = 0; i < kCalls; ++i) ASSERT_EQ(t.call(i), t.expected(i));
  const uint64_t live = inline_count(engine_, c, t.entry);
  // The thread's first call made its counter block, through the callback.
  EXPECT_EQ(live + c.callback_calls.load(), uint64_t{kCalls});
  EXPECT_GE(live, uint64_t{kCalls - 1});
  EXPECT_EQ(c.wrong_ip.load(), 0u);
  ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(t.call(i), t.expected(i));
  long sites = 0;
  EXPECT_EQ(inline_count(engine_, c, t.entry, &sites), live);  // final, kept
  EXPECT_EQ(sites, 1);
  EXPECT_EQ(bytes_around(t.entry), before);
  // No recursion drop: the inline path calls nothing.
  ftjit_stats s1;
  ftjit_get_stats(engine_, &s1);
  EXPECT_EQ(s1.recursion_drops, s0.recursion_drops);
}

TEST_P(InlineCount, AttachedAgainCountsAfresh) {
  const InlineTarget& t = GetParam();
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_GENERATED);
  ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 100; ++i) t.call(i);
  ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK);
  EXPECT_EQ(inline_count(engine_, c, t.entry) + c.callback_calls.load(), 100u);
  // A new attach starts the ops' counts again (final counts are dropped).
  const uint64_t callbacks = c.callback_calls.load();
  ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 50; ++i) t.call(i);
  EXPECT_EQ(inline_count(engine_, c, t.entry) + c.callback_calls.load() - callbacks, 50u);
  ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK);
}

TEST_P(InlineCount, FourThreadsCountExactlyAndAreReadWhileTheyRun) {
  const InlineTarget& t = GetParam();
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
  constexpr int kThreads = 4;
  constexpr uint64_t kCalls = 200000;
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&] {
      for (uint64_t i = 0; i < kCalls; ++i) {
        if (t.call(static_cast<int64_t>(i)) != t.expected(static_cast<int64_t>(i))) std::abort();
      }
      finished.fetch_add(1);
    });
  }
  // Read while they run: never more than was called, never going back.
  uint64_t last = 0;
  while (finished.load() < kThreads) {
    const uint64_t now = inline_count(engine_, c, t.entry) + c.callback_calls.load();
    EXPECT_GE(now, last);
    EXPECT_LE(now, kThreads * kCalls);
    last = now;
    std::this_thread::yield();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(inline_count(engine_, c, t.entry) + c.callback_calls.load(), kThreads * kCalls);
  EXPECT_LE(c.callback_calls.load(), uint64_t{kThreads});  // first calls only
  ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK);
}

// A signal handler that calls the traced function, on the thread that is
// calling it too: the per-thread counter's update cannot be split.
std::atomic<const InlineTarget*> g_signal_target{nullptr};
std::atomic<uint64_t> g_handler_calls{0};
void call_from_handler(int) {
  const InlineTarget* t = g_signal_target.load();
  for (int i = 0; i < 3; ++i) t->call(i);
  g_handler_calls.fetch_add(3);
}

TEST_P(InlineCount, SignalHandlersCallingTheSiteLoseNoCount) {
  const InlineTarget& t = GetParam();
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
  g_signal_target = &t;
  g_handler_calls = 0;
  // A handler's call while this thread is inside a callback (its first
  // call, which makes its counter block) runs untraced, as every call made
  // under a callback does: counted as a recursion drop.
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
  // Until the handlers ran a few hundred times (signals are sent every
  // 50 us, but a loaded machine may run the sender late).
  uint64_t calls = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls < 300000 || (g_handler_calls.load() < 600 && std::chrono::steady_clock::now() < give_up)) {
    t.call(static_cast<int64_t>(calls++));
  }
  stop = true;
  signaller.join();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_GT(g_handler_calls.load(), 0u);
  ftjit_stats s1;
  ftjit_get_stats(engine_, &s1);
  EXPECT_EQ(inline_count(engine_, c, t.entry) + c.callback_calls.load() + (s1.recursion_drops - s0.recursion_drops),
            calls + g_handler_calls.load());
  ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK);
}

TEST_P(InlineCount, AttachDetachWhileFourThreadsCall) {
  const InlineTarget& t = GetParam();
  const auto before = bytes_around(t.entry);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        if (t.call(i) != t.expected(i)) bad.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    Counter c;
    init_counter(&c, t, round % 2 ? FTJIT_STRATEGY_AUTO : FTJIT_STRATEGY_GENERATED);
    ASSERT_EQ(attach(&c), FTJIT_OK) << ftjit_last_error();
    // Until the threads called it (they may be slow to get a core).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (inline_count(engine_, c, t.entry) + c.callback_calls.load() < 1000 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(c.wrong_ip.load(), 0u);
    EXPECT_GT(inline_count(engine_, c, t.entry) + c.callback_calls.load(), 0u);
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(bytes_around(t.entry), before);
}

// Where the engine does not compile it (the list route, a site shared with
// another ops), the callback counts every call.
TEST_P(InlineCount, CallbackRoutesCountEveryCall) {
  const InlineTarget& t = GetParam();
  Counter list;
  init_counter(&list, t, FTJIT_STRATEGY_LIST);
  ASSERT_EQ(attach(&list), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 100; ++i) t.call(i);
  EXPECT_EQ(list.callback_calls.load(), 100u);
  long sites = -2;
  EXPECT_EQ(inline_count(engine_, list, t.entry, &sites), 0u);
  EXPECT_EQ(sites, 0);
  ASSERT_EQ(ftjit_detach(engine_, &list.ops), FTJIT_OK);

  Counter a, b;
  init_counter(&a, t, FTJIT_STRATEGY_AUTO);
  init_counter(&b, t, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&a), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 10; ++i) t.call(i);  // a alone: inline
  ASSERT_EQ(attach(&b), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 20; ++i) t.call(i);  // shared: callbacks
  ASSERT_EQ(ftjit_detach(engine_, &b.ops), FTJIT_OK);
  for (int i = 0; i < 30; ++i) t.call(i);  // a alone again: inline
  EXPECT_EQ(inline_count(engine_, a, t.entry) + a.callback_calls.load(), 60u);
  EXPECT_GE(a.callback_calls.load(), 20u);
  EXPECT_EQ(inline_count(engine_, b, t.entry) + b.callback_calls.load(), 20u);
  ASSERT_EQ(ftjit_detach(engine_, &a.ops), FTJIT_OK);
}

TEST_P(InlineCount, WhatCannotBeCompiledOrCombinedIsRefused) {
  const InlineTarget& t = GetParam();
  const auto before = bytes_around(t.entry);
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_AUTO);
  c.ops.inline_entry = 99;
  EXPECT_EQ(attach(&c), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ftjit_last_error(), "inline"), nullptr) << ftjit_last_error();
  c.ops.inline_entry = FTJIT_INLINE_COUNT;
  c.ops.exit_func = [](uint64_t, uint64_t, ftjit_ops*, ftjit_ret_regs*) {};
  EXPECT_EQ(attach(&c), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ftjit_last_error(), "exit callback"), nullptr) << ftjit_last_error();
  EXPECT_EQ(bytes_around(t.entry), before);
  Read r;
  EXPECT_EQ(ftjit_inline_read(engine_, &c.ops, visit, &r), -1);
}

#if defined(__x86_64__)
// A program that makes threads without end gets at most kMaxInlineBlocks
// counter blocks (one mapping each) from us; the threads after those are
// counted by the callback, as exactly. In a child process: the blocks stay
// for the life of the process. (Native only: thousands of threads are slow
// under qemu.)
int churn_threads_in_child() {
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  if (engine == nullptr) return 10;
  const InlineTarget t = inline_targets()[0];
  Counter c;
  init_counter(&c, t, FTJIT_STRATEGY_AUTO);
  const char* include[] = {t.symbol};
  ftjit_filter f{include, 1, nullptr, 0};
  if (ftjit_attach(engine, &c.ops, &f) != FTJIT_OK) return 11;
  constexpr int kThreads = 4096 + 200;  // runtime/inline_blocks.h, kMaxInlineBlocks
  constexpr int kCallsEach = 5;
  for (int k = 0; k < kThreads; ++k) {
    std::thread([&] {
      for (int i = 0; i < kCallsEach; ++i) t.call(i);
    }).join();
  }
  if (inline_count(engine, c, t.entry) + c.callback_calls.load() != uint64_t{kThreads} * kCallsEach) return 12;
  // Every thread past the bound ran each call through the callback.
  if (c.callback_calls.load() < uint64_t{200} * kCallsEach) return 13;
  if (ftjit_detach(engine, &c.ops) != FTJIT_OK) return 14;
  ftjit_engine_destroy(engine);
  return 0;
}

TEST(InlineBlocks, ThreadsBeyondTheBoundAreCountedByCallbacks) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(churn_threads_in_child());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 engine, 11 attach, 12 counts, 13 no callback past the bound, 14 detach";
}
#endif

INSTANTIATE_TEST_SUITE_P(Layouts, InlineCount, ::testing::ValuesIn(inline_targets()),
                         [](const ::testing::TestParamInfo<InlineTarget>& info) {
                           return std::string(info.param.layout);
                         });

}  // namespace
