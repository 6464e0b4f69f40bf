// SPDX-License-Identifier: MIT
// Exit hooks, the reentrancy guard and thread filters, per strategy: exit
// callbacks see the entry's ip/parent_ip and the return registers; frames
// left by an exception are reported unwound; callbacks that call traced
// code do not recurse; a thread filter keeps other threads out.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/e2e/register_keeping_call.h"
#include "tests/e2e/traced.h"

extern "C" int test_call_misaligned(int (*fn)(int, int), int a, int b);  // misaligned_call.S

// Named, not anonymous: the unity build compiles this file beside the other
// e2e tests, whose helpers have the same names.
namespace exit_hook_test {

struct Event {
  bool exit;
  uint64_t ip, parent_ip;
  bool unwound;
  uint64_t ret0;
  double fp0;
};

struct Log {
  ftjit_ops ops;
  std::vector<Event> events;  // the guard makes allocating here safe
  int call_traced_from_entry = 0;
};

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs*) {
  auto* l = static_cast<Log*>(ops->private_data);
  l->events.push_back({false, ip, parent_ip, false, 0, 0});
  if (l->call_traced_from_entry) (void)traced_six(1, 2, 3, 4, 5, 6);  // must not recurse
}

void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_ret_regs* ret) {
  auto* l = static_cast<Log*>(ops->private_data);
  Event e{true, ip, parent_ip, ret == nullptr, 0, 0};
  if (ret != nullptr) {
    e.ret0 = ret->ret[0];
    std::memcpy(&e.fp0, ret->fp[0], sizeof e.fp0);
  }
  l->events.push_back(e);
}

class ExitHookTest : public ::testing::TestWithParam<ftjit_strategy> {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
    ftjit_ops_init(&log_.ops);
    log_.ops.func = on_entry;
    log_.ops.exit_func = on_exit;
    log_.ops.private_data = &log_;
    log_.ops.strategy = GetParam();
  }
  void TearDown() override { ftjit_engine_destroy(engine_); }

  ftjit_status attach(std::vector<const char*> names) {
    ftjit_filter f{names.data(), names.size(), nullptr, 0};
    return ftjit_attach(engine_, &log_.ops, &f);
  }

  ftjit_engine* engine_ = nullptr;
  Log log_;
};

__attribute__((noinline)) int call_add(int a, int b) {
  int (*volatile fn)(int, int) = traced_add;
  int r = fn(a, b);
  asm volatile("" ::: "memory");
  return r;
}

TEST_P(ExitHookTest, ExitSeesEntryIpParentAndReturnValue) {
  ASSERT_EQ(attach({"traced_add", "traced_fp"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_add(20, 22), 42);
  double (*volatile fp)(double, double) = traced_fp;
  EXPECT_EQ(fp(2.0, 3.0), 6.5);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  ASSERT_EQ(log_.events.size(), 4u);
  const Event &in = log_.events[0], &out = log_.events[1];
  EXPECT_FALSE(in.exit);
  EXPECT_TRUE(out.exit);
  EXPECT_EQ(in.ip, reinterpret_cast<uint64_t>(&traced_add));
  EXPECT_EQ(out.ip, in.ip);
  EXPECT_EQ(out.parent_ip, in.parent_ip);
  EXPECT_FALSE(out.unwound);
  EXPECT_EQ(static_cast<int>(out.ret0), 42);
  EXPECT_TRUE(log_.events[3].exit);
  EXPECT_EQ(log_.events[3].fp0, 6.5);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
  ftjit_stats s;
  ftjit_get_stats(engine_, &s);
  EXPECT_GE(s.exit_hooks, 2u);
}

TEST_P(ExitHookTest, RecursionPairsLastInFirstOut) {
  ASSERT_EQ(attach({"traced_recurse"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(traced_recurse(500), 500);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  ASSERT_EQ(log_.events.size(), 2u * 501);
  std::vector<uint64_t> stack;
  for (const Event& e : log_.events) {
    if (!e.exit) {
      stack.push_back(e.parent_ip);
    } else {
      ASSERT_FALSE(stack.empty());
      EXPECT_EQ(e.parent_ip, stack.back());
      EXPECT_FALSE(e.unwound);
      stack.pop_back();
    }
  }
  EXPECT_TRUE(stack.empty());
}

[[noreturn]] void thrower(int v) { throw std::runtime_error("boom " + std::to_string(v)); }

TEST_P(ExitHookTest, ExceptionThroughHookedFramesIsReportedUnwound) {
  ASSERT_EQ(attach({"traced_throw_through", "traced_add"}), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 100; ++i) {
    try {
      traced_throw_through(i, thrower);
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "boom " + std::to_string(i));
    }
    EXPECT_EQ(call_add(i, 1), i + 1);  // hooks still work afterwards
  }
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  int unwound = 0, returned = 0, entries = 0;
  for (const Event& e : log_.events) {
    if (!e.exit) {
      ++entries;
    } else if (e.unwound) {
      ++unwound;
    } else {
      ++returned;
    }
  }
  EXPECT_EQ(entries, 200);
  EXPECT_EQ(unwound, 100);
  EXPECT_EQ(returned, 100);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
}

TEST_P(ExitHookTest, CallbackCallingTracedCodeDoesNotRecurse) {
  log_.call_traced_from_entry = 1;
  ASSERT_EQ(attach({"traced_add", "traced_six"}), FTJIT_OK) << ftjit_last_error();
  ftjit_stats before, after;
  ftjit_get_stats(engine_, &before);
  EXPECT_EQ(call_add(1, 2), 3);
  ftjit_get_stats(engine_, &after);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  // traced_add's entry and exit only: the nested traced_six ran
  // untraced, and was counted.
  ASSERT_EQ(log_.events.size(), 2u);
  EXPECT_EQ(after.recursion_drops - before.recursion_drops, 1u);
}

TEST_P(ExitHookTest, DetachWhileFramesAreHookedReturnsNormally) {
  ASSERT_EQ(attach({"traced_throw_through"}), FTJIT_OK) << ftjit_last_error();
  static ftjit_engine* engine;
  static Log* log;
  engine = engine_;
  log = &log_;
  // Detach from inside the hooked frame (in the function it calls, which
  // is not a callback): the frame returns after the ops is gone.
  traced_throw_through(0, [](int) { ASSERT_EQ(ftjit_detach(engine, &log->ops), FTJIT_OK); });
  ASSERT_EQ(log_.events.size(), 1u);  // the entry; no exit after detach
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
}

TEST_P(ExitHookTest, EngineDestroyedWhileFramesAreHookedReturnsNormally) {
  ASSERT_EQ(attach({"traced_throw_through"}), FTJIT_OK) << ftjit_last_error();
  static ftjit_engine* engine;
  engine = engine_;
  // The frame was hooked by an engine that is gone when it returns: the
  // exit trampoline and the real return address outlive every engine.
  traced_throw_through(0, [](int) { ftjit_engine_destroy(engine); });
  engine_ = ftjit_engine_create(nullptr);  // for TearDown, and: a new one works
  ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  ASSERT_EQ(log_.events.size(), 1u);  // the entry; the exit after destroy is silent
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
  ASSERT_EQ(attach({"traced_add"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_add(2, 3), 5);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  EXPECT_EQ(log_.events.size(), 3u);
}

TEST_P(ExitHookTest, ThreadExitingInsideHookedFramesReportsThemUnwound) {
  ASSERT_EQ(attach({"traced_throw_through"}), FTJIT_OK) << ftjit_last_error();
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, nullptr,
                [](void*) -> void* {
                  traced_throw_through(0, [](int) { pthread_exit(nullptr); });
                  return nullptr;
                },
                nullptr),
            0);
  ASSERT_EQ(pthread_join(t, nullptr), 0);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  ASSERT_EQ(log_.events.size(), 2u);
  EXPECT_TRUE(log_.events[1].exit);
  EXPECT_TRUE(log_.events[1].unwound);
}

TEST_P(ExitHookTest, EntryWithAMisalignedStack) {
  // Entry and exit trampolines both save vector registers with aligned
  // stores: they must realign rather than trust the ABI.
  ASSERT_EQ(attach({"traced_add"}), FTJIT_OK) << ftjit_last_error();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(test_call_misaligned(traced_add, i, 100), i + 100);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  ASSERT_EQ(log_.events.size(), 20u);
  EXPECT_EQ(static_cast<int>(log_.events[19].ret0), 109);
}

TEST_P(ExitHookTest, CallerKeepsItsCallClobberedRegisters) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's hooks in traced_add clobber registers themselves";
#endif
  // GCC's -fipa-ra: a caller that saw its callee write none of rcx, rdx,
  // rsi, rdi, r8-r11, xmm2.. keeps values there across the call. The site's
  // stub, the entry trampoline, the callbacks' C code and the exit path
  // must not lose them.
  const uint64_t* want = kKeptRegisters;
  uint64_t out[16] = {};
  ASSERT_EQ(test_call_keeping_registers(traced_add, out), 5);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], want[i]) << "untraced, register " << i;
  ASSERT_EQ(attach({"traced_add"}), FTJIT_OK) << ftjit_last_error();
  for (int round = 0; round < 3; ++round) {
    std::memset(out, 0, sizeof out);
    ASSERT_EQ(test_call_keeping_registers(traced_add, out), 5);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], want[i]) << "traced, register " << i;
  }
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  EXPECT_EQ(log_.events.size(), 6u);
  // Entry only: the site calls the trampoline.
  log_.ops.exit_func = nullptr;
  ASSERT_EQ(attach({"traced_add"}), FTJIT_OK) << ftjit_last_error();
  std::memset(out, 0, sizeof out);
  ASSERT_EQ(test_call_keeping_registers(traced_add, out), 5);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], want[i]) << "entry only, register " << i;
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  EXPECT_EQ(log_.events.size(), 7u);
}

// Callbacks that write junk into every register a C function may: the
// general call-clobbered ones always, xmm0-15 unless their ops promised
// FTJIT_OPS_F_NO_FP (then the trampolines do not keep them).
std::atomic<int> g_scribbles{0};

void scribble_general() {
  asm volatile(
      "mov $-1, %%rcx\n mov $-1, %%rdx\n mov $-1, %%rsi\n mov $-1, %%rdi\n"
      "mov $-1, %%r8\n mov $-1, %%r9\n mov $-1, %%r10\n mov $-1, %%r11\n" ::
          : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11");
}

void scribble_vector() {
  asm volatile(
      "pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1\n pcmpeqd %%xmm2, %%xmm2\n"
      "pcmpeqd %%xmm3, %%xmm3\n pcmpeqd %%xmm4, %%xmm4\n pcmpeqd %%xmm5, %%xmm5\n"
      "pcmpeqd %%xmm6, %%xmm6\n pcmpeqd %%xmm7, %%xmm7\n pcmpeqd %%xmm8, %%xmm8\n"
      "pcmpeqd %%xmm9, %%xmm9\n pcmpeqd %%xmm10, %%xmm10\n pcmpeqd %%xmm11, %%xmm11\n"
      "pcmpeqd %%xmm12, %%xmm12\n pcmpeqd %%xmm13, %%xmm13\n pcmpeqd %%xmm14, %%xmm14\n"
      "pcmpeqd %%xmm15, %%xmm15\n" ::
          : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
            "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

void scribbling_entry(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  g_scribbles.fetch_add(1, std::memory_order_relaxed);
  scribble_general();
  if ((ops->flags & FTJIT_OPS_F_NO_FP) == 0) scribble_vector();
}

void scribbling_exit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_ret_regs*) {
  g_scribbles.fetch_add(1, std::memory_order_relaxed);
  scribble_general();
  if ((ops->flags & FTJIT_OPS_F_NO_FP) == 0) scribble_vector();
}

TEST_P(ExitHookTest, CallbacksThatScribbleOnRegistersLoseTheCallerNothing) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's hooks in traced_add clobber registers themselves";
#endif
  // As above, with callbacks that really overwrite every register they are
  // allowed to: with FP saves and without (the landing keeps xmm2-15 only
  // around callbacks that may use them).
  const uint64_t* want = kKeptRegisters;
  for (uint32_t flags : {0u, FTJIT_OPS_F_NO_FP}) {
    ftjit_ops ops;
    ftjit_ops_init(&ops);
    ops.func = scribbling_entry;
    ops.exit_func = scribbling_exit;
    ops.flags = flags;
    ops.strategy = GetParam();
    const char* name = "traced_add";
    ftjit_filter f{&name, 1, nullptr, 0};
    ASSERT_EQ(ftjit_attach(engine_, &ops, &f), FTJIT_OK) << ftjit_last_error();
    g_scribbles = 0;
    for (int round = 0; round < 3; ++round) {
      uint64_t out[16] = {};
      ASSERT_EQ(test_call_keeping_registers(traced_add, out), 5);
      for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(out[i], want[i]) << "flags " << flags << ", register " << i;
      }
    }
    ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK);
    EXPECT_EQ(g_scribbles.load(), 6) << "flags " << flags;
  }
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
}

TEST_P(ExitHookTest, HookedSiteJumpsToItsStubUntilDetached) {
  // An exit-hooked site is entered by a jump (to a stub of its own), so
  // that the function's return is one the CPU predicts; a second ops with
  // an exit changes only the stub's word; detach puts the bytes back.
  uint8_t before[5];
  std::memcpy(before, reinterpret_cast<const void*>(&traced_add), sizeof before);
  ASSERT_EQ(attach({"traced_add"}), FTJIT_OK) << ftjit_last_error();
  uint8_t hooked[5];
  std::memcpy(hooked, reinterpret_cast<const void*>(&traced_add), sizeof hooked);
  EXPECT_EQ(hooked[0], 0xe9);
  EXPECT_EQ(call_add(20, 22), 42);
  Log second;
  ftjit_ops_init(&second.ops);
  second.ops.func = on_entry;
  second.ops.exit_func = on_exit;
  second.ops.private_data = &second;
  second.ops.strategy = GetParam();
  const char* name = "traced_add";
  ftjit_filter f{&name, 1, nullptr, 0};
  ASSERT_EQ(ftjit_attach(engine_, &second.ops, &f), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(std::memcmp(hooked, reinterpret_cast<const void*>(&traced_add), 5), 0);
  EXPECT_EQ(call_add(1, 2), 3);
  ASSERT_EQ(ftjit_detach(engine_, &second.ops), FTJIT_OK);
  EXPECT_EQ(call_add(3, 4), 7);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  EXPECT_EQ(std::memcmp(before, reinterpret_cast<const void*>(&traced_add), 5), 0);
  EXPECT_EQ(log_.events.size(), 6u);
  ASSERT_EQ(second.events.size(), 2u);
  EXPECT_EQ(static_cast<int>(second.events[1].ret0), 3);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
}

__attribute__((noinline)) int call_tail(int a, int b) {
  int (*volatile fn)(int, int) = traced_tail;
  int r = fn(a, b);
  asm volatile("" ::: "memory");
  return r;
}

TEST_P(ExitHookTest, TailCalledFunctionSeesTheRealCaller) {
#if defined(__SANITIZE_THREAD__)
  // TSan's function-exit hook runs after the callee: no tail call is left.
  GTEST_SKIP() << "traced_tail makes no tail call under ThreadSanitizer";
#endif
  // traced_tail's return address is replaced when traced_add starts (a jmp,
  // not a call): traced_add's parent_ip must still be call_tail's return
  // address, not the exit trampoline, and both exits must come, LIFO.
  ASSERT_EQ(attach({"traced_tail", "traced_add"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_tail(40, 2), 42);
  ASSERT_EQ(ftjit_detach(engine_, &log_.ops), FTJIT_OK);
  ASSERT_EQ(log_.events.size(), 4u);
  const uint64_t tail = reinterpret_cast<uint64_t>(&traced_tail);
  const uint64_t add = reinterpret_cast<uint64_t>(&traced_add);
  EXPECT_EQ(log_.events[0].ip, tail);
  EXPECT_EQ(log_.events[1].ip, add);
  EXPECT_EQ(log_.events[1].parent_ip, log_.events[0].parent_ip);
  EXPECT_TRUE(log_.events[2].exit);
  EXPECT_EQ(log_.events[2].ip, add);
  EXPECT_EQ(log_.events[2].parent_ip, log_.events[0].parent_ip);
  EXPECT_EQ(static_cast<int>(log_.events[2].ret0), 42);
  EXPECT_TRUE(log_.events[3].exit);
  EXPECT_EQ(log_.events[3].ip, tail);
  EXPECT_FALSE(log_.events[3].unwound);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ExitHookTest,
                         ::testing::Values(FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_CALL_OPS,
                                           FTJIT_STRATEGY_LIST),
                         [](const auto& info) { return std::string(ftjit_strategy_name(info.param)) == "call-ops"
                                                           ? std::string("call_ops")
                                                           : std::string(ftjit_strategy_name(info.param)); });

// ---------------------------------------------------------------------------

std::atomic<int> g_counted{0};
void count_entry(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) { g_counted.fetch_add(1); }

TEST(ThreadFilter, MainThreadOnly) {
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  ftjit_thread_filter tf{nullptr, 0, nullptr, 1};
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_entry;
  ops.threads = &tf;
  const char* name = "traced_add";
  ftjit_filter f{&name, 1, nullptr, 0};
  g_counted = 0;
  ASSERT_EQ(ftjit_attach(engine, &ops, &f), FTJIT_OK) << ftjit_last_error();
  std::thread([] {
    for (int i = 0; i < 10; ++i) call_add(i, i);
  }).join();
  for (int i = 0; i < 7; ++i) call_add(i, i);
  EXPECT_EQ(ftjit_detach(engine, &ops), FTJIT_OK);
  EXPECT_EQ(g_counted.load(), 7);
  ftjit_engine_destroy(engine);
}

TEST(ThreadFilter, ByNameAndByTid) {
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  int32_t me = static_cast<int32_t>(syscall(SYS_gettid));
  ftjit_thread_filter tf{&me, 1, "worker-*", 0};
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_entry;
  ops.threads = &tf;
  const char* name = "traced_add";
  ftjit_filter f{&name, 1, nullptr, 0};
  g_counted = 0;
  ASSERT_EQ(ftjit_attach(engine, &ops, &f), FTJIT_OK) << ftjit_last_error();
  auto run = [](const char* tname, int n) {
    std::thread([=] {
      pthread_setname_np(pthread_self(), tname);
      for (int i = 0; i < n; ++i) call_add(i, i);
    }).join();
  };
  run("worker-1", 5);   // by name
  run("other", 100);    // neither
  for (int i = 0; i < 3; ++i) call_add(i, i);  // by tid
  EXPECT_EQ(ftjit_detach(engine, &ops), FTJIT_OK);
  EXPECT_EQ(g_counted.load(), 8);
  // A filter that selects nothing is refused.
  ftjit_thread_filter none{nullptr, 0, nullptr, 0};
  ops.threads = &none;
  EXPECT_EQ(ftjit_attach(engine, &ops, &f), FTJIT_E_INVALID_ARGUMENT);
  ftjit_engine_destroy(engine);
}

}  // namespace exit_hook_test
