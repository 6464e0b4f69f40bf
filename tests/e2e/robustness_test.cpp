// SPDX-License-Identifier: MIT
// What real programs do around traced code: their own SIGTRAP handler,
// sleds someone else patched, detach while a thread sits in a callback,
// control calls from inside a callback, exceptions through traced frames,
// traced code in signal handlers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/common/arena_traps.h"
#include "runtime/thread_control.h"
#include "tests/e2e/traced.h"

namespace {

std::atomic<int> g_program_traps{0};
void program_trap_handler(int, siginfo_t*, void*) { g_program_traps.fetch_add(1); }

int count_calls_hits;
void count_calls(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) { ++count_calls_hits; }
std::atomic<long> g_count_calls_atomic{0};
void count_calls_atomic(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
  g_count_calls_atomic.fetch_add(1, std::memory_order_relaxed);
}

// An initialised ops whose callback is `func`.
ftjit_ops make_ops(ftjit_func_t func, ftjit_strategy strategy = FTJIT_STRATEGY_AUTO) {
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = func;
  ops.strategy = strategy;
  return ops;
}

ftjit_status attach_one(ftjit_engine* e, ftjit_ops* ops, const char* name) {
  const char* inc[] = {name};
  ftjit_filter f{inc, 1, nullptr, 0};
  return ftjit_attach(e, ops, &f);
}

TEST(Robustness, ForeignSigtrapGoesToTheProgramsHandler) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = program_trap_handler;
  sa.sa_flags = SA_SIGINFO;
  ASSERT_EQ(sigaction(SIGTRAP, &sa, nullptr), 0);

  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  ftjit_ops ops = make_ops(count_calls);
  ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK);
  asm volatile("int3");  // the program's own breakpoint
  EXPECT_EQ(g_program_traps.load(), 1);
  raise(SIGTRAP);
  EXPECT_EQ(g_program_traps.load(), 2);
  int (*volatile fn)(int, int) = traced_add;
  EXPECT_EQ(fn(1, 2), 3);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
}

// A program that sets its own SIGTRAP handler after the engine set ftjit's
// (a crash reporter set up late): the next batch puts ftjit's back on top,
// chaining to the program's. Otherwise a thread meeting one of the
// batch's breakpoints would go to the program's handler, return behind
// the breakpoint, inside the instruction being rewritten, and die (SIGILL).
TEST(Robustness, SigtrapHandlerSetAfterTheEngineDoesNotGetTheBatchesTraps) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  struct sigaction sa, old;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = program_trap_handler;
  sa.sa_flags = SA_SIGINFO;
  ASSERT_EQ(sigaction(SIGTRAP, &sa, &old), 0);
  g_program_traps = 0;
  g_count_calls_atomic = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&stop] {
      int (*volatile fn)(int, int) = traced_add;
      while (!stop.load(std::memory_order_relaxed)) fn(1, 2);
    });
  }
  ftjit_ops ops = make_ops(count_calls_atomic);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int cycles = 0;
  for (; cycles < 300 && std::chrono::steady_clock::now() < deadline; ++cycles) {
    ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK) << ftjit_last_error();
    ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK) << ftjit_last_error();
  }
  stop = true;
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(g_program_traps.load(), 0) << "the program's handler got a batch's breakpoint";
  EXPECT_GT(g_count_calls_atomic.load(), 0);
  asm volatile("int3");  // the program's own breakpoint still reaches its handler
  EXPECT_EQ(g_program_traps.load(), 1);
  ftjit_engine_destroy(e);
  sigaction(SIGTRAP, &old, nullptr);
}

// A program whose SIGTRAP handler, set after the engine's, chains to the
// one it replaced (ftjit's): once a batch puts ftjit's back on top, a trap
// of the program's own goes ftjit -> program -> ftjit; it must end there,
// not go round until the stack runs out.
struct sigaction g_replaced_trap_action;
std::atomic<int> g_chaining_traps{0};
void chaining_trap_handler(int sig, siginfo_t* si, void* uc) {
  g_chaining_traps.fetch_add(1);
  if ((g_replaced_trap_action.sa_flags & SA_SIGINFO) != 0 && g_replaced_trap_action.sa_sigaction != nullptr) {
    g_replaced_trap_action.sa_sigaction(sig, si, uc);
  }
}

TEST(Robustness, ChainingSigtrapHandlerSetAfterTheEngineSeesItsTrapOnce) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = chaining_trap_handler;
  sa.sa_flags = SA_SIGINFO;
  ASSERT_EQ(sigaction(SIGTRAP, &sa, &g_replaced_trap_action), 0);
  g_chaining_traps = 0;
  ftjit_ops ops = make_ops(count_calls);
  ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK) << ftjit_last_error();
  asm volatile("int3");
  EXPECT_EQ(g_chaining_traps.load(), 1);
  ftjit_engine_destroy(e);
  sigaction(SIGTRAP, &g_replaced_trap_action, nullptr);
}

// Overwrites a function's entry the way another tool might (a jump).
void patch_foreign(void* fn, const uint8_t* bytes, size_t n) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t at = reinterpret_cast<uintptr_t>(fn);
  void* start = reinterpret_cast<void*>(at & ~(page - 1));
  ASSERT_EQ(mprotect(start, 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
  std::memcpy(reinterpret_cast<void*>(at), bytes, n);
  ASSERT_EQ(mprotect(start, 2 * page, PROT_READ | PROT_EXEC), 0);
}

TEST(Robustness, SledPatchedBeforeDiscoveryIsRefused) {
  // `call +0` where the sled should be: someone else's hook.
  const uint8_t hook[5] = {0xe8, 0x00, 0x00, 0x00, 0x00};
  patch_foreign(reinterpret_cast<void*>(traced_noslot_mul), hook, 5);
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  ftjit_ops ops = make_ops(count_calls);
  EXPECT_EQ(attach_one(e, &ops, "traced_noslot_*"), FTJIT_E_UNEXPECTED_BYTES);
  std::string msg = ftjit_last_error();
  EXPECT_NE(msg.find("traced_noslot_mul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("e8 00 00 00 00"), std::string::npos) << msg;
  EXPECT_EQ(ftjit_ops_site_count(e, &ops), -1);
  ftjit_engine_destroy(e);
}

TEST(Robustness, SledPatchedAfterDiscoveryIsRefusedAndNothingIsWritten) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  // Another tool rewrites one of the thousand sleds after discovery.
  const uint8_t other[5] = {0x0f, 0x0b, 0x90, 0x90, 0x90};  // ud2
  uintptr_t victim = reinterpret_cast<uintptr_t>(traced_many[500]);
  patch_foreign(reinterpret_cast<void*>(victim), other, 5);
  uint8_t first[13];
  uintptr_t first_fn = reinterpret_cast<uintptr_t>(traced_many[0]);
  std::memcpy(first, reinterpret_cast<const void*>(first_fn - 8), 13);
  ftjit_ops ops = make_ops(count_calls, FTJIT_STRATEGY_GENERATED);
  EXPECT_EQ(attach_one(e, &ops, "traced_many_*"), FTJIT_E_UNEXPECTED_BYTES);
  EXPECT_NE(std::string(ftjit_last_error()).find("found 0f 0b 90 90 90"), std::string::npos)
      << ftjit_last_error();
  EXPECT_EQ(std::memcmp(first, reinterpret_cast<const void*>(first_fn - 8), 13), 0);
  ftjit_stats st;
  ftjit_get_stats(e, &st);
  EXPECT_EQ(st.sites_enabled, 0u);
  // The others still work.
  ASSERT_EQ(attach_one(e, &ops, "traced_many_1*"), FTJIT_OK) << ftjit_last_error();
  count_calls_hits = 0;
  EXPECT_EQ(traced_many[0](1), 101);
  EXPECT_EQ(count_calls_hits, 1);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
}

std::atomic<long> g_rollback_hits{0};
void count_rollback(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) { ++g_rollback_hits; }

// The sleds were verified when the sites became one NOP; another tool then
// rewrites the last site of the batch. The batch verifies each site as it
// plants its trap, so every other site has a trap by the time the bad one
// is found: they must all go back to what they held, with not one callback
// run by the threads that hit them meanwhile.
TEST(Robustness, ForeignRewriteFoundMidBatchPutsBackEveryTrapPlanted) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  // Keeps the engine from restoring the compiler's sleds between attaches.
  ftjit_ops keeper = make_ops(count_calls, FTJIT_STRATEGY_GENERATED);
  ftjit_ops ops = make_ops(count_rollback, FTJIT_STRATEGY_GENERATED);
  EXPECT_EQ(attach_one(e, &keeper, "traced_add"), FTJIT_OK) << ftjit_last_error();
  // traced_many_1*, not traced_many_500, which the test above leaves
  // rewritten. The batch's sites: those that hold a call while attached.
  EXPECT_EQ(attach_one(e, &ops, "traced_many_1*"), FTJIT_OK) << ftjit_last_error();
  std::vector<int> mine;
  for (int i = 0; i < TRACED_MANY; ++i) {
    if (*reinterpret_cast<const uint8_t*>(traced_many[i]) == 0xe8) mine.push_back(i);
  }
  EXPECT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ASSERT_GT(mine.size(), 100u);
  int want[TRACED_MANY];
  for (int i : mine) want[i] = traced_many[i](1);

  int last = mine[0];
  for (int i : mine) {
    if (reinterpret_cast<uintptr_t>(traced_many[i]) > reinterpret_cast<uintptr_t>(traced_many[last])) {
      last = i;
    }
  }
  uint8_t before[TRACED_MANY][5];
  for (int i : mine) std::memcpy(before[i], reinterpret_cast<const void*>(traced_many[i]), 5);
  const uint8_t other[5] = {0x0f, 0x0b, 0x90, 0x90, 0x90};  // ud2
  patch_foreign(reinterpret_cast<void*>(traced_many[last]), other, 5);

  g_rollback_hits = 0;
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0};
  std::thread caller([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i : mine) {
        if (i == last) continue;
        int (*volatile fn)(int) = traced_many[i];
        (void)fn(i);
        calls.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });
  while (calls.load() < static_cast<long>(mine.size())) std::this_thread::yield();
  for (int round = 0; round < 300; ++round) {
    EXPECT_EQ(attach_one(e, &ops, "traced_many_1*"), FTJIT_E_UNEXPECTED_BYTES);
    EXPECT_NE(std::string(ftjit_last_error()).find("found 0f 0b 90 90 90"), std::string::npos)
        << ftjit_last_error();
  }
  stop = true;
  caller.join();
  EXPECT_EQ(g_rollback_hits.load(), 0);
  for (int i : mine) {
    if (i == last) continue;
    EXPECT_EQ(std::memcmp(before[i], reinterpret_cast<const void*>(traced_many[i]), 5), 0)
        << "traced_many_" << i;
  }

  // The victim put back, the batch goes through and traces every site.
  patch_foreign(reinterpret_cast<void*>(traced_many[last]), before[last], 5);
  EXPECT_EQ(attach_one(e, &ops, "traced_many_1*"), FTJIT_OK) << ftjit_last_error();
  g_rollback_hits = 0;
  for (int i : mine) EXPECT_EQ(traced_many[i](1), want[i]);
  EXPECT_EQ(g_rollback_hits.load(), static_cast<long>(mine.size()));
  EXPECT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  EXPECT_EQ(ftjit_detach(e, &keeper), FTJIT_OK);
  ftjit_engine_destroy(e);
}

std::atomic<int> g_inside{0};
std::atomic<bool> g_callback_done{false};
void slow_callback(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
  g_inside = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  g_callback_done = true;
}

// Calls traced code once detach is waiting for it, then stays a while: the
// nested call's own entry and exit must not count as this frame's exit.
void slow_callback_calling_traced_code(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
  g_inside = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  long (*volatile fn)(long, long, long, long, long, long) = traced_six;
  (void)fn(1, 2, 3, 4, 5, 6);  // nested: dropped by the guard
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  g_callback_done = true;
}

// For each strategy: a thread calls traced_add into `callback` (which sets
// g_inside on its way in and g_callback_done on its way out), and detach,
// called meanwhile, must not return before the callback did.
void expect_detach_waits_for(ftjit_engine* e, ftjit_func_t callback) {
  for (ftjit_strategy s : {FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_CALL_OPS, FTJIT_STRATEGY_LIST}) {
    g_inside = 0;
    g_callback_done = false;
    ftjit_ops ops = make_ops(callback, s);
    ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK) << ftjit_last_error();
    std::thread t([] {
      int (*volatile fn)(int, int) = traced_add;
      EXPECT_EQ(fn(2, 2), 4);
    });
    while (g_inside == 0) std::this_thread::yield();
    ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK) << ftjit_last_error();
    EXPECT_TRUE(g_callback_done) << "detach returned while a thread was inside the callback ("
                                 << ftjit_strategy_name(s) << ")";
    t.join();
  }
}

TEST(Robustness, DetachWaitsForAThreadInsideTheCallback) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  expect_detach_waits_for(e, slow_callback);
  ftjit_stats st;
  ftjit_get_stats(e, &st);
  EXPECT_GE(st.grace_periods, 3u);
  ftjit_engine_destroy(e);
}

TEST(Robustness, DetachWaitsForACallbackThatCallsTracedCode) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  // Something on traced_six, so that the callback's call of it runs a
  // trampoline (which the guard turns back).
  ftjit_ops other = make_ops(count_calls);
  ASSERT_EQ(attach_one(e, &other, "traced_six"), FTJIT_OK) << ftjit_last_error();
  expect_detach_waits_for(e, slow_callback_calling_traced_code);
  EXPECT_EQ(ftjit_detach(e, &other), FTJIT_OK);
  ftjit_engine_destroy(e);
}

ftjit_engine* g_engine_for_callback;
ftjit_status g_status_from_callback;
void detaching_callback(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  g_status_from_callback = ftjit_detach(g_engine_for_callback, ops);
}

TEST(Robustness, ControlCallsFromInsideACallbackAreRefused) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr);
  g_engine_for_callback = e;
  ftjit_ops ops = make_ops(detaching_callback);
  ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK);
  int (*volatile fn)(int, int) = traced_add;
  EXPECT_EQ(fn(2, 3), 5);
  EXPECT_EQ(g_status_from_callback, FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
}

[[noreturn]] void thrower(int v) { throw std::runtime_error("boom " + std::to_string(v)); }

TEST(Robustness, ExceptionsPassThroughTracedFrames) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr);
  ftjit_ops ops = make_ops(count_calls);
  ASSERT_EQ(attach_one(e, &ops, "traced_throw_through"), FTJIT_OK);
  count_calls_hits = 0;
  for (int i = 0; i < 100; ++i) {
    try {
      traced_throw_through(i, thrower);
      FAIL() << "no exception";
    } catch (const std::runtime_error& ex) {
      EXPECT_EQ(std::string(ex.what()), "boom " + std::to_string(i));
    }
  }
  EXPECT_EQ(count_calls_hits, 100);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
}

std::atomic<int> g_handler_result{0};
void usr1_handler(int) {
  int (*volatile fn)(int, int) = traced_add;
  g_handler_result = fn(40, 2);
}

TEST(Robustness, TracedCodeInASignalHandler) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr);
  signal(SIGUSR1, usr1_handler);
  ftjit_ops ops = make_ops(count_calls);
  ASSERT_EQ(attach_one(e, &ops, "traced_add"), FTJIT_OK);
  count_calls_hits = 0;
  for (int i = 0; i < 50; ++i) raise(SIGUSR1);
  EXPECT_EQ(g_handler_result.load(), 42);
  EXPECT_EQ(count_calls_hits, 50);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
  signal(SIGUSR1, SIG_DFL);
}

}  // namespace

namespace {

std::atomic<int> g_fork_hits{0};
void fork_hit(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) { g_fork_hits.fetch_add(1); }

// fork() while attached: the child keeps a private copy of the code as it
// was, the parent's later attach/detach never reaches it, and the child's
// inherited engine refuses to act on the parent's code.
TEST(Robustness, ForkedChildIsIsolatedFromTheParentsPatching) {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  ftjit_ops ops = make_ops(fork_hit, FTJIT_STRATEGY_GENERATED);
  const char* inc[] = {"traced_add"};
  ftjit_filter f{inc, 1, nullptr, 0};
  ASSERT_EQ(ftjit_attach(e, &ops, &f), FTJIT_OK) << ftjit_last_error();
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int (*volatile add)(int, int) = traced_add;
    long (*volatile six)(long, long, long, long, long, long) = traced_six;
    int code = 0;
    g_fork_hits = 0;
    if (add(1, 2) != 3 || g_fork_hits != 1) code |= 1;  // traced, as in the parent
    char c;
    if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &c, 1) != 1) code |= 2;
    // The parent has detached `ops` and attached it to traced_six meanwhile.
    if (add(1, 2) != 3 || g_fork_hits != 2) code |= 4;      // still traced here
    if (six(1, 0, 0, 0, 0, 0) != 1 || g_fork_hits != 2) code |= 8;  // not traced here
    if (ftjit_detach(e, &ops) != FTJIT_E_INVALID_ARGUMENT) code |= 16;
    ftjit_engine_destroy(e);
    _exit(code);
  }
  char c;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  const char* inc6[] = {"traced_six"};
  ftjit_filter f6{inc6, 1, nullptr, 0};
  ASSERT_EQ(ftjit_attach(e, &ops, &f6), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child check bits " << WEXITSTATUS(status);
  g_fork_hits = 0;
  long (*volatile six)(long, long, long, long, long, long) = traced_six;
  EXPECT_EQ(six(1, 0, 0, 0, 0, 0), 1);
  EXPECT_EQ(g_fork_hits.load(), 1);
  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  ftjit_engine_destroy(e);
}

// fork() at any instant of attach and detach batches: a child never
// inherits a half-written batch (int3 bytes that nothing in it would ever
// finish: it died of SIGTRAP), nor code the parent goes on writing. Every
// child runs every traced function and exits 0.
std::atomic<int> g_fork_race_exits{0};
void fork_race_exit(uint64_t, uint64_t, ftjit_ops*, ftjit_ret_regs*) {
  g_fork_race_exits.fetch_add(1, std::memory_order_relaxed);
}

void fork_race(bool exit_hooks) {
#if defined(__SANITIZE_THREAD__)
  // TSan holds signals back from a thread blocked in the loader (its lock
  // is uninstrumented): the engine's stop-the-world, run while a code
  // change holds the loader's lock, then times out; and TSan does not see
  // the loader's own locking around its frees. Checked natively and under ASan.
  GTEST_SKIP() << "threads blocked in the loader cannot be parked under TSan";
#endif
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  std::atomic<bool> stop{false};
  std::atomic<int> children{0};
  std::atomic<int> bad_children{0};
  std::string first_bad;  // written by the forker only, read after join
  std::thread forker([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      pid_t pid = fork();
      if (pid < 0) {
        bad_children.fetch_add(1);
        break;
      }
      if (pid == 0) {
        int code = 0;
        for (int i = 0; i < TRACED_MANY; ++i) {
          if (traced_many[i](1) != 1 + 100 + i) code = 1;
        }
        int (*volatile add)(int, int) = traced_add;
        if (add(2, 3) != 5) code = 1;
        _exit(code);
      }
      int status = 0;
      if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (bad_children.fetch_add(1) == 0) {
          first_bad = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                          : "status " + std::to_string(status);
        }
      }
      children.fetch_add(1, std::memory_order_relaxed);
    }
  });
  ftjit_ops ops = make_ops(count_calls_atomic);
  if (exit_hooks) ops.exit_func = fork_race_exit;
  const char* many[] = {"traced_many_*", "traced_add"};
  const char* few[] = {"traced_many_1*", "traced_add"};
  ftjit_filter f_many{many, 2, nullptr, 0};
  ftjit_filter f_few{few, 2, nullptr, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int cycles = 0;
  for (; cycles < 200 && std::chrono::steady_clock::now() < deadline; ++cycles) {
    ASSERT_EQ(ftjit_attach(e, &ops, &f_many), FTJIT_OK) << ftjit_last_error();
    ASSERT_EQ(ftjit_set_filter(e, &ops, &f_few), FTJIT_OK) << ftjit_last_error();
    ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK) << ftjit_last_error();
  }
  stop = true;
  forker.join();
  EXPECT_GE(cycles, 5);  // how many varies with the load: only check the race ran
  EXPECT_GT(children.load(), 0);
  EXPECT_EQ(bad_children.load(), 0) << "of " << children.load() << " children; first: " << first_bad;
  ftjit_engine_destroy(e);
}

TEST(Robustness, ForkDuringBatchesLeavesEveryChildWhole) { fork_race(false); }
TEST(Robustness, ForkDuringBatchesWithExitHooksLeavesEveryChildWhole) { fork_race(true); }

}  // namespace

// ---------------------------------------------------------------------------
// Signal frames whose saved pc lies in code ftjit rewrites or frees
// ---------------------------------------------------------------------------

#if defined(__x86_64__)
namespace {

// A thread is single-stepped (the x86 trap flag) until its pc is where the
// test wants it (`wanted`); the SIGTRAP handler of that step then stays on
// top of that pc while the test's attach or detach runs (it is told
// `started`), 200 ms, and notes whether that was `done` meanwhile: it must
// not have been, as the thread returns to the saved pc. Stepping makes the
// frame sure to come: asynchronous signals land only on some instructions
// on some VMs (one here never interrupted a trampoline's first instruction
// in 58,000 signals), and a single-step trap leaves the same signal frame
// a SIGPROF landing there would.
struct HeldSignal {
  bool (*wanted)(uint64_t pc) = nullptr;
  std::atomic<int> captured{0};
  std::atomic<bool> started{false};
  std::atomic<bool> done{false};
  std::atomic<bool> done_in_handler{false};
  std::atomic<long> steps{0};
};
HeldSignal g_held;
constexpr greg_t kTrapFlag = 0x100;  // EFLAGS.TF

// SIGUSR2: the spinner starts stepping where it was interrupted, unless
// that is inside the SIGTRAP handler (SIGTRAP blocked): a step there would
// be a blocked trap, which the kernel delivers by killing the process.
void start_stepping(int, siginfo_t*, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  if (g_held.captured.load() == 0 && sigismember(&uc->uc_sigmask, SIGTRAP) == 0) {
    uc->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
  }
}

// SIGTRAP after each stepped instruction: holds the thread at the wanted pc
// and stops the stepping there; steps on elsewhere.
void holding_handler(int, siginfo_t*, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  const uint64_t pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  g_held.steps.fetch_add(1);
  if (!g_held.wanted(pc) || g_held.captured.exchange(1) != 0) {
    if (g_held.captured.load() == 0) uc->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
    else uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
    return;
  }
  uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
  while (!g_held.started.load()) __builtin_ia32_pause();
  timespec until{};
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += 200'000'000;
  if (until.tv_nsec >= 1'000'000'000) {
    until.tv_sec += 1;
    until.tv_nsec -= 1'000'000'000;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
  g_held.done_in_handler = g_held.done.load();
}

// A thread calling traced_noslot_mul in a loop, stepped (from a SIGUSR2)
// until the SIGTRAP handler holds it.
class HeldSpinner {
 public:
  explicit HeldSpinner(bool (*wanted)(uint64_t pc)) {
    g_held.wanted = wanted;
    g_held.captured = 0;
    g_held.started = false;
    g_held.done = false;
    g_held.done_in_handler = false;
    g_held.steps = 0;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = start_stepping;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    installed_ = sigaction(SIGUSR2, &sa, &old_usr2_) == 0;
    sa.sa_sigaction = holding_handler;
    installed_ = sigaction(SIGTRAP, &sa, &old_trap_) == 0 && installed_;
    thread_ = std::thread([this] {
      int (*volatile f)(int, int) = traced_noslot_mul;
      long s = 0;
      for (int i = 0; !stop_.load(std::memory_order_relaxed); ++i) s += f(i & 1023, 3);
      sum_ = s;
    });
  }
  ~HeldSpinner() { stop(); }
  bool installed() const { return installed_; }
  // Starts the stepping, again only if it stopped (no step in 100 ms), for
  // up to 20 s: whether the handler caught the thread where wanted. (Under
  // ASan a step may take long: a `rep` string instruction traps once per
  // iteration.)
  bool capture() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    long seen = g_held.steps.load();
    while (g_held.captured.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      const long now = g_held.steps.load();
      if (now == seen) pthread_kill(thread_.native_handle(), SIGUSR2);  // not stepping (yet)
      seen = now;
      for (int i = 0; i < 100 && g_held.captured.load() == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return g_held.captured.load() != 0;
  }
  long steps() const { return g_held.steps.load(); }
  // Stops the loop (after the handler returned) and puts the handlers back:
  // the loop's sum, which is never 0 once it called at all.
  long stop() {
    if (thread_.joinable()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stop_ = true;
      thread_.join();
      if (installed_) {
        sigaction(SIGUSR2, &old_usr2_, nullptr);
        sigaction(SIGTRAP, &old_trap_, nullptr);
      }
    }
    return sum_.load();
  }

 private:
  struct sigaction old_usr2_, old_trap_;
  bool installed_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<long> sum_{0};
  std::thread thread_;
};

// GCC's =5 sled is five one-byte NOPs; attach makes it one 5-byte NOP with
// every thread parked, moving a parked pc that lies inside to its end. A
// thread that was interrupted inside the sled by a signal and is still in
// the handler when attach parks it returns, later, to the pc its signal
// frame saved: the rewrite must wait until it has (the hazard cycles
// caught it as a SIGILL at entry+6, the `call` after the sled entered at
// its second byte).
bool inside_the_sled(uint64_t pc) {
  const auto begin = reinterpret_cast<uint64_t>(&traced_noslot_mul);
  return pc > begin && pc < begin + 5;
}

// A trampoline counts its entry first and its exit last: a thread
// interrupted at its first instruction (or at its final `ret`) by a signal
// whose handler is still running shows no open entry, and its own pc is
// in the handler. Detach frees the trampoline after a grace period, which
// must wait until the handler has returned into it (the arm64 kernel
// leg's hazard cycles caught it as SIGILL in freed trampoline memory: TCG
// takes signals at block starts, which a trampoline's first instruction
// always is).
constexpr int kMaxRanges = 16;
std::atomic<uint64_t> g_tramp_lo[kMaxRanges], g_tramp_hi[kMaxRanges];
std::atomic<int> g_tramp_ranges{0};

bool on_a_trampoline_outside_its_counts(uint64_t pc) {
  if (ftjit::ftjit_trampoline_counts.entries != ftjit::ftjit_trampoline_counts.exits) return false;
  for (int i = 0; i < g_tramp_ranges.load(); ++i) {
    if (pc >= g_tramp_lo[i].load() && pc < g_tramp_hi[i].load()) return true;
  }
  return false;
}

// The mappings of the trampolines' memfds, from /proc/self/maps.
void read_trampoline_ranges() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line) && n < kMaxRanges) {
    if (line.find("ftjit-trampolines") == std::string::npos) continue;
    unsigned long lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    g_tramp_lo[n] = lo;
    g_tramp_hi[n] = hi;
    ++n;
  }
  g_tramp_ranges = n;
}

}  // namespace

TEST(Robustness, SignalFrameInsideASledSurvivesItsRewrite) {
#if defined(__SANITIZE_THREAD__)
  // TSan's runtime catches every signal itself and runs the program's
  // handler later, from its own code, with a copy of the context: no
  // handler ever runs on top of the interrupted sled here.
  GTEST_SKIP() << "TSan defers signal handlers: none runs on top of the interrupted sled";
#endif
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  HeldSpinner spinner(inside_the_sled);
  ASSERT_TRUE(spinner.installed());
  const bool captured = spinner.capture();
  g_count_calls_atomic = 0;
  ftjit_ops ops = make_ops(count_calls_atomic);
  ftjit_status st = FTJIT_OK;
  g_held.started = true;
  if (captured) st = attach_one(e, &ops, "traced_noslot_mul");
  g_held.done = true;
  const long sum = spinner.stop();
  if (captured && st == FTJIT_OK) {
    EXPECT_EQ(ftjit_detach(e, &ops), FTJIT_OK);
  }
  ftjit_engine_destroy(e);
  ASSERT_TRUE(captured) << "stepping did not reach the sled in 20 s (" << spinner.steps() << " steps): the test proves nothing";
  ASSERT_EQ(st, FTJIT_OK) << ftjit_last_error();
  EXPECT_GT(g_count_calls_atomic.load(), 0);
  EXPECT_NE(sum, 0);
  // Attach waited for the handler to return before it rewrote the sled.
  EXPECT_FALSE(g_held.done_in_handler.load());
}

TEST(Robustness, SignalFrameInsideATrampolineKeepsItUntilTheHandlerReturns) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan defers signal handlers: none runs on top of the interrupted trampoline";
#endif
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  g_count_calls_atomic = 0;
  ftjit_ops ops = make_ops(count_calls_atomic, FTJIT_STRATEGY_GENERATED);
  ASSERT_EQ(attach_one(e, &ops, "traced_noslot_mul"), FTJIT_OK) << ftjit_last_error();
  read_trampoline_ranges();
  ASSERT_GT(g_tramp_ranges.load(), 0) << "no ftjit-trampolines mapping in /proc/self/maps";
  HeldSpinner spinner(on_a_trampoline_outside_its_counts);
  ASSERT_TRUE(spinner.installed());
  const bool captured = spinner.capture();
  g_held.started = true;
  const ftjit_status st = ftjit_detach(e, &ops);
  g_held.done = true;
  const long sum = spinner.stop();
  ftjit_engine_destroy(e);
  ASSERT_TRUE(captured) << "stepping did not reach a trampoline outside its counts in 20 s (" << spinner.steps()
                        << " steps): the test proves nothing";
  ASSERT_EQ(st, FTJIT_OK) << ftjit_last_error();
  EXPECT_GT(g_count_calls_atomic.load(), 0);
  EXPECT_NE(sum, 0);
  // Detach's grace period waited for the handler before the trampoline was freed.
  EXPECT_FALSE(g_held.done_in_handler.load());
}
#endif

// Unused trampoline memory traps (tests/common/arena_traps.h).
TEST(CodeArenaTraps, UnusedMemoryTrapsThoughFilledAsReached) {
  ftjit::testing::expect_unused_arena_memory_traps(reinterpret_cast<uint64_t>(&traced_add), 1ll << 31);
}
