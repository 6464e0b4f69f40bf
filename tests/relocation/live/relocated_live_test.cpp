// SPDX-License-Identifier: MIT
// Relocated entries in a live process (FTJIT_OPS_F_RELOCATE through the C
// API): functions of a library built without sleds (reloc_live_target.c)
// and of libc, called by eight threads while the main thread attaches and
// detaches over and over.
//
// Exactness by seqlock, as in tests/e2e/stress_test.cpp: the controller
// makes g_seq odd before it changes anything and even after ftjit_*
// returned; a worker's batch whose start and end saw the same even value
// ran wholly attached or wholly detached, and its own hits (thread-local)
// must be exactly its calls, or zero. Every call's result is checked too:
// a copy that computed anything else fails at once.
//
// Then the hazards of the write itself: a thread stopped by a signal
// handler inside the overwritten bytes while an attach comes (the attach
// waits, or refuses that function); a thread stopped inside the copy while
// the detach comes (the stub outlives it); a thread blocked in read()
// while read is relocated. After each, the code is what it was.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <csetjmp>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"

namespace {

// ThreadSanitizer runs a program's signal handlers, ftjit's control
// handler among them, only when the thread leaves the call it is blocked
// in (read(), a handler's nanosleep): a thread stopped there answers no
// stop-the-world. The tests that stop one so are skipped under it.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif
constexpr const char* kTsanDefersSignals =
    "ThreadSanitizer defers signal handlers of a thread blocked in a call: it answers no stop-the-world";

using SquareFn = long (*)(long);
using SumFn = long (*)(const long*, long);
using MixFn = long (*)(long, long);
using FaultFn = long (*)(long, const int*);

struct Target {
  void* handle = nullptr;
  SquareFn square = nullptr;
  SumFn sum = nullptr;
  MixFn mix = nullptr;
  FaultFn fault = nullptr;
};

Target& target() {
  static Target t = [] {
    Target t;
    t.handle = dlopen(FTJIT_RELOC_LIVE_TARGET, RTLD_NOW);
    if (t.handle == nullptr) return t;
    t.square = reinterpret_cast<SquareFn>(dlsym(t.handle, "reloc_live_square"));
    t.sum = reinterpret_cast<SumFn>(dlsym(t.handle, "reloc_live_sum"));
    t.mix = reinterpret_cast<MixFn>(dlsym(t.handle, "reloc_live_mix"));
    t.fault = reinterpret_cast<FaultFn>(dlsym(t.handle, "reloc_fault_at_k"));
    return t;
  }();
  return t;
}

// The first bytes of each function, as the loader mapped them.
std::vector<uint8_t> bytes_at(const void* fn, size_t n = 32) {
  const auto* p = static_cast<const uint8_t*>(fn);
  return std::vector<uint8_t>(p, p + n);
}

struct EngineHandle {
  ftjit_engine* e = ftjit_engine_create(nullptr);
  ~EngineHandle() {
    if (e != nullptr) ftjit_engine_destroy(e);
  }
};

thread_local uint64_t t_hits[2];
thread_local uint64_t t_exits[2];

void count_hit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  ++t_hits[reinterpret_cast<uintptr_t>(ops->private_data)];
}
void count_exit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_ret_regs*) {
  ++t_exits[reinterpret_cast<uintptr_t>(ops->private_data)];
}

// An ops counting its calls in t_hits[which], relocating entries.
void relocating_counter(ftjit_ops* ops, uintptr_t which) {
  ftjit_ops_init(ops);
  ops->func = count_hit;
  ops->private_data = reinterpret_cast<void*>(which);
  ops->flags |= FTJIT_OPS_F_RELOCATE;
}

ftjit_status attach(ftjit_engine* e, ftjit_ops* ops, const char* pattern) {
  const char* inc[] = {pattern};
  ftjit_filter f{inc, 1, nullptr, 0};
  return ftjit_attach(e, ops, &f);
}

// The libc function the cycles relocate with the library's: getpid, a
// system call's wrapper; on riscv64 that is `li a7, N; ecall`, whose ecall
// lies inside the 8 bytes (syscall-inside), and labs takes its place.
#if defined(__riscv)
constexpr const char* kLibcFn = "labs";
constexpr const char* kLibcPattern = "libc.so*!labs";
bool call_libc_fn(long i) {
  static long (*const volatile fn)(long) = reinterpret_cast<long (*)(long)>(dlsym(RTLD_DEFAULT, "labs"));
  return fn(-i - 1) == i + 1;
}
#else
constexpr const char* kLibcFn = "getpid";
constexpr const char* kLibcPattern = "libc.so*!getpid";
bool call_libc_fn(long) { return getpid() > 0; }
#endif

class RelocatedLive : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(target().handle, nullptr) << dlerror();
    ASSERT_NE(target().fault, nullptr);
    ASSERT_NE(engine_.e, nullptr) << ftjit_last_error();
  }
  EngineHandle engine_;
};

// Four threads, a thousand attach/detach cycles (40 under qemu-user) of one ops (entry and exit
// hooks) on the library's three functions and libc's getpid (kLibcFn). Each cycle
// relocates the four entries and writes them back.
TEST_F(RelocatedLive, CountsExactAcrossAttachDetachCycles) {
  constexpr int kWorkers = 4;
  constexpr int kBatch = 64;
  const int cycles =
      std::getenv("FTJIT_RELOC_CYCLES") ? std::atoi(std::getenv("FTJIT_RELOC_CYCLES")) : FTJIT_RELOC_DEFAULT_CYCLES;
  const Target& t = target();
  const std::vector<uint8_t> before[] = {bytes_at(reinterpret_cast<void*>(t.square)),
                                         bytes_at(reinterpret_cast<void*>(t.sum)),
                                         bytes_at(reinterpret_cast<void*>(t.mix)),
                                         bytes_at(dlsym(RTLD_DEFAULT, kLibcFn))};
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> stable_attached{0}, stable_detached{0}, failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      const long data[4] = {1, 2, 3, w};
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t s0 = seq.load(std::memory_order_acquire);
        const uint64_t h0 = t_hits[0], x0 = t_exits[0];
        for (int i = 0; i < kBatch; ++i) {
          bool ok = t.square(i) == long{i} * i;
          ok &= t.sum(data, 4) == 6 + w;
          ok &= t.mix(i, 3) == ((i ^ 24) + 9);
          ok &= call_libc_fn(i);
          if (!ok) failures.fetch_add(1);
        }
        const uint64_t s1 = seq.load(std::memory_order_acquire);
        if (s0 != s1 || (s0 & 1) != 0) continue;
        const bool attached = (s0 & 2) != 0;
        // square, sum, mix, mix's square and getpid (kLibcFn)
        const uint64_t want = attached ? 5 * kBatch : 0;
        if (t_hits[0] - h0 != want || t_exits[0] - x0 != want) failures.fetch_add(1);
        (attached ? stable_attached : stable_detached).fetch_add(1);
        // Paced: eight threads spinning on two cores would starve the
        // controller, not test it.
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  }
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_hit;
  ops.exit_func = count_exit;
  ops.private_data = reinterpret_cast<void*>(uintptr_t{0});
  ops.flags |= FTJIT_OPS_F_RELOCATE;
  const char* inc[] = {"libreloclive*!reloc_live_*", kLibcPattern};
  const ftjit_filter filter{inc, 2, nullptr, 0};
  int done = 0;
  for (; done < cycles && failures.load() == 0; ++done) {
    seq.fetch_add(1);  // odd: changing
    ASSERT_EQ(ftjit_attach(engine_.e, &ops, &filter), FTJIT_OK) << ftjit_last_error();
    ASSERT_EQ(ftjit_ops_site_count(engine_.e, &ops), 4);
    seq.fetch_add(1);  // even, attached (bit 1 set)
    std::this_thread::sleep_for(std::chrono::microseconds(done % 7 == 0 ? 2000 : 200));
    seq.fetch_add(1);
    ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
    seq.fetch_add(1);  // even, detached
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stop = true;
  for (auto& th : workers) th.join();
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(done, cycles);
  EXPECT_GT(stable_attached.load(), 0u);
  EXPECT_GT(stable_detached.load(), 0u);
  const std::vector<uint8_t> after[] = {bytes_at(reinterpret_cast<void*>(t.square)),
                                        bytes_at(reinterpret_cast<void*>(t.sum)),
                                        bytes_at(reinterpret_cast<void*>(t.mix)),
                                        bytes_at(dlsym(RTLD_DEFAULT, kLibcFn))};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(before[k], after[k]) << "function " << k << " not restored";
  std::printf("%d cycles; stable batches: %llu attached, %llu detached\n", done,
              static_cast<unsigned long long>(stable_attached.load()),
              static_cast<unsigned long long>(stable_detached.load()));
}

// Without the flag a sled-less function is not traced, and the error says
// which option would.
TEST_F(RelocatedLive, WithoutTheFlagTheErrorNamesIt) {
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_hit;
  EXPECT_NE(attach(engine_.e, &ops, "libreloclive*!reloc_live_square"), FTJIT_OK);
  EXPECT_NE(std::string(ftjit_last_error()).find("--relocate"), std::string::npos) << ftjit_last_error();
}

// ---------------------------------------------------------------------------
// A thread stopped inside the bytes, or inside the copy
// ---------------------------------------------------------------------------

// reloc_fault_at_k loads from a page that is not readable: the SIGSEGV
// handler parks the thread (its signal frame holds the pc of the load)
// until released, then makes the page readable and returns, so the load
// runs again.
int* g_page = nullptr;
std::atomic<int> g_parked{0};
std::atomic<bool> g_release{false};
std::atomic<uint64_t> g_fault_pc{0};

void park_on_fault(int, siginfo_t*, void* uc) {
#if defined(__x86_64__)
  g_fault_pc.store(static_cast<uint64_t>(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]));
#elif defined(__aarch64__)
  g_fault_pc.store(static_cast<ucontext_t*>(uc)->uc_mcontext.pc);
#elif defined(__riscv)
  g_fault_pc.store(static_cast<ucontext_t*>(uc)->uc_mcontext.__gregs[REG_PC]);
#endif
  g_parked.fetch_add(1);
  while (!g_release.load()) {
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  mprotect(g_page, 4096, PROT_READ | PROT_WRITE);
}

class ParkedInside : public RelocatedLive {
 protected:
  void SetUp() override {
    if (kTsan) GTEST_SKIP() << kTsanDefersSignals;
    RelocatedLive::SetUp();
    g_page = static_cast<int*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(g_page, MAP_FAILED);
    *g_page = 7;
    struct sigaction sa{};
    sa.sa_sigaction = park_on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGSEGV, &sa, &old_), 0);
    handler_set_ = true;
    g_parked = 0;
    g_release = false;
  }
  void TearDown() override {
    if (!handler_set_) return;
    sigaction(SIGSEGV, &old_, nullptr);
    munmap(g_page, 4096);
  }
  // Starts a thread that calls reloc_fault_at_k(5, page) with the page
  // unreadable, and waits until its handler parks it.
  std::thread park_a_thread(long* result) {
    mprotect(g_page, 4096, PROT_NONE);
    std::thread th([result] { *result = target().fault(5, g_page); });
    while (g_parked.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return th;
  }
  struct sigaction old_{};
  bool handler_set_ = false;
};

// x86-64: the handler's frame holds entry+3, inside the jmp's bytes. The
// attach waits (it retries for about a second) and succeeds once the
// handler returned; the parked call ends right, and later calls count.
TEST_F(ParkedInside, AttachWaitsForAHandlerStoppedInsideTheBytes) {
  long result = 0;
  std::thread parked = park_a_thread(&result);
  const uint64_t entry = reinterpret_cast<uint64_t>(target().fault);
  const uint64_t fault_pc = g_fault_pc.load();
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    g_release = true;
  });
  ASSERT_EQ(attach(engine_.e, &ops, "libreloclive*!reloc_fault_at_k"), FTJIT_OK) << ftjit_last_error();
  releaser.join();
  parked.join();
  EXPECT_EQ(result, 12);
  t_hits[0] = 0;
  EXPECT_EQ(target().fault(1, g_page), 8);
  EXPECT_EQ(t_hits[0], 1u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(target().fault(1, g_page), 8);
  EXPECT_EQ(t_hits[0], 1u);
  // Where the handler stood, for the record: the load.
  EXPECT_GE(fault_pc, entry);
}

// A handler that does not return within the retries: that function is
// refused (the attach then selects nothing), nothing was written, and the
// thread goes on unharmed once released.
TEST_F(ParkedInside, AHandlerThatStaysMakesTheFunctionARefusal) {
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(target().fault));
  long result = 0;
  std::thread parked = park_a_thread(&result);
  if (g_fault_pc.load() == reinterpret_cast<uint64_t>(target().fault)) {
    // arm64: the load is the entry itself, which the branch replaces
    // whole; a thread there needs no move and nothing waits.
    g_release = true;
    parked.join();
    GTEST_SKIP() << "the load is the entry's first instruction on this ISA";
  }
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_hit;
  ops.flags |= FTJIT_OPS_F_RELOCATE;
  EXPECT_NE(attach(engine_.e, &ops, "libreloclive*!reloc_fault_at_k"), FTJIT_OK);
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(target().fault)));
  g_release = true;
  parked.join();
  EXPECT_EQ(result, 12);
}

// The copy faults (the load moved into the stub): the thread's handler
// frame holds a pc inside the copy when the detach writes the entry back.
// The stub must outlive it: the detach's grace period waits, the thread
// returns into the copy, runs on into the function and returns right.
TEST_F(ParkedInside, DetachWaitsForAThreadInsideTheCopy) {
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(target().fault));
  ASSERT_EQ(attach(engine_.e, &ops, "libreloclive*!reloc_fault_at_k"), FTJIT_OK) << ftjit_last_error();
  long result = 0;
  std::thread parked = park_a_thread(&result);
  const uint64_t entry = reinterpret_cast<uint64_t>(target().fault);
  const uint64_t pc = g_fault_pc.load();
  EXPECT_TRUE(pc < entry || pc >= entry + 16) << "the fault should be in the stub's copy";
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    g_release = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  const auto waited = std::chrono::steady_clock::now() - t0;
  releaser.join();
  parked.join();
  EXPECT_EQ(result, 12);
  EXPECT_GE(waited, std::chrono::milliseconds(200)) << "the detach did not wait for the thread in the copy";
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(target().fault)));
}

// A thread blocked in read() while read is relocated and written back:
// nothing waits for it, and its read returns what was written.
TEST_F(RelocatedLive, AThreadBlockedInReadIsNoHindrance) {
  if (kTsan) GTEST_SKIP() << kTsanDefersSignals;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::vector<uint8_t> before = bytes_at(dlsym(RTLD_DEFAULT, "read"));
  char got = 0;
  std::atomic<bool> reading{false};
  std::thread reader([&] {
    reading = true;
    ASSERT_EQ(read(fds[0], &got, 1), 1);
  });
  while (!reading) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ftjit_ops ops;
  relocating_counter(&ops, 1);
  ASSERT_EQ(attach(engine_.e, &ops, "libc.so*!read"), FTJIT_OK) << ftjit_last_error();
  t_hits[1] = 0;
  char c = 0;
  int fds2[2];
  ASSERT_EQ(pipe(fds2), 0);
  ASSERT_EQ(write(fds2[1], "y", 1), 1);
  EXPECT_EQ(read(fds2[0], &c, 1), 1);
  EXPECT_EQ(t_hits[1], 1u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  reader.join();
  EXPECT_EQ(got, 'x');
  EXPECT_EQ(before, bytes_at(dlsym(RTLD_DEFAULT, "read")));
  for (int fd : {fds[0], fds[1], fds2[0], fds2[1]}) close(fd);
}

// A library unloaded while its relocated entry is attached: the engine
// forgets it (its text is gone, its stub is retired), and the detach
// writes nothing where it was.
TEST_F(RelocatedLive, DlcloseWhileRelocated) {
  const std::string dir = ::testing::TempDir() + "reloc_dlclose_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string copy = dir + "/libreloccopy.so";
  std::filesystem::copy_file(FTJIT_RELOC_LIVE_TARGET, copy, std::filesystem::copy_options::overwrite_existing);
  void* handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto square = reinterpret_cast<SquareFn>(dlsym(handle, "reloc_live_square"));
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  ASSERT_EQ(attach(engine_.e, &ops, "libreloccopy*!reloc_live_square"), FTJIT_OK) << ftjit_last_error();
  t_hits[0] = 0;
  EXPECT_EQ(square(6), 36);
  EXPECT_EQ(t_hits[0], 1u);
  ASSERT_EQ(dlclose(handle), 0);
  EXPECT_GE(ftjit_refresh_modules(engine_.e), 0) << ftjit_last_error();
  EXPECT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  // The library again, at whatever address: its bytes are the file's.
  handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  square = reinterpret_cast<SquareFn>(dlsym(handle, "reloc_live_square"));
  EXPECT_EQ(square(5), 25);
  dlclose(handle);
  std::filesystem::remove_all(dir);
}

// A relocated function whose callee throws, or longjmps, out through it,
// with entry and exit hooks attached (the exit hook has replaced its
// return address): the exception finds its handler, the longjmp its
// setjmp, each frame reports its exit, and the function then returns
// through its exit hook as before.
jmp_buf g_jump_out;
TEST_F(RelocatedLive, ExceptionsAndLongjmpLeaveThroughARelocatedFrame) {
  using ThroughFn = long (*)(long (*)(long), long);
  const auto through = reinterpret_cast<ThroughFn>(dlsym(target().handle, "reloc_throw_through"));
  ASSERT_NE(through, nullptr);
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(through));
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  ops.exit_func = count_exit;
  ASSERT_EQ(attach(engine_.e, &ops, "libreloclive*!reloc_throw_through"), FTJIT_OK) << ftjit_last_error();
  t_hits[0] = t_exits[0] = 0;
  auto twice = +[](long x) -> long { return 2 * x; };
  auto thrower = +[](long x) -> long { throw std::runtime_error(std::to_string(x)); };
  auto jumper = +[](long x) -> long { longjmp(g_jump_out, static_cast<int>(x) + 1); };
  EXPECT_EQ(through(twice, 5), 11);
  EXPECT_EQ(t_exits[0], 1u);
  int caught = 0, jumped = 0;
  for (long i = 0; i < 100; ++i) {
    try {
      through(thrower, i);
    } catch (const std::runtime_error& e) {
      caught += e.what() == std::to_string(i);
    }
    if (setjmp(g_jump_out) == 0) {
      through(jumper, i);
    } else {
      ++jumped;
    }
    ASSERT_EQ(through(twice, i), 2 * i + 1);
  }
  EXPECT_EQ(caught, 100);
  EXPECT_EQ(jumped, 100);
  EXPECT_EQ(t_hits[0], 301u);
  // Every frame reports its exit, also one a throw or a longjmp left (as at
  // a sled: a trace stays complete).
  EXPECT_EQ(t_exits[0], 301u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(through)));
  EXPECT_EQ(through(twice, 3), 7);
}

// A library loaded after the attach: the functions without a sled the
// ops' filter selects in it are relocated when the engine sees it, and
// given back when the ops goes.
TEST_F(RelocatedLive, ALibraryLoadedLaterIsRelocatedToo) {
  const std::string dir = ::testing::TempDir() + "reloc_later_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string copy = dir + "/libreloclater.so";
  std::filesystem::copy_file(FTJIT_RELOC_LIVE_TARGET, copy, std::filesystem::copy_options::overwrite_existing);
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  const char* inc[] = {"libreloclive*!reloc_live_square", "libreloclater*!reloc_live_sum"};
  const ftjit_filter filter{inc, 2, nullptr, 0};
  ASSERT_EQ(ftjit_attach(engine_.e, &ops, &filter), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_.e, &ops), 1);
  void* handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto sum = reinterpret_cast<SumFn>(dlsym(handle, "reloc_live_sum"));
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(sum));
  EXPECT_GE(ftjit_refresh_modules(engine_.e), 0) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_.e, &ops), 2);
  t_hits[0] = 0;
  const long data[3] = {1, 2, 3};
  EXPECT_EQ(sum(data, 3), 6);
  EXPECT_EQ(target().square(3), 9);
  EXPECT_EQ(t_hits[0], 2u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(sum)));
  EXPECT_EQ(sum(data, 3), 6);
  EXPECT_EQ(t_hits[0], 2u);
  dlclose(handle);
  std::filesystem::remove_all(dir);
}

// A child forked while an entry is relocated keeps its own copy of the
// code (entry and stub) and runs right after the parent detached and
// freed the stub.
TEST_F(RelocatedLive, ForkedChildKeepsItsCopy) {
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(target().square));
  ASSERT_EQ(attach(engine_.e, &ops, "libreloclive*!reloc_live_square"), FTJIT_OK) << ftjit_last_error();
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);
    bool ok = true;
    for (long i = 0; i < 1000; ++i) ok &= target().square(i) == i * i;
    _exit(ok ? 0 : 1);
  }
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(target().square)));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  close(go[0]);
  close(go[1]);
}

// set_filter moves relocated entries with the filter: the function it
// leaves gets its bytes back, the one it takes is relocated. (16 bytes:
// reloc_live_sum starts 26 bytes after reloc_live_square.)
TEST_F(RelocatedLive, SetFilterMovesRelocatedEntries) {
  const Target& t = target();
  const std::vector<uint8_t> square_before = bytes_at(reinterpret_cast<void*>(t.square), 16);
  const std::vector<uint8_t> sum_before = bytes_at(reinterpret_cast<void*>(t.sum), 16);
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  ASSERT_EQ(attach(engine_.e, &ops, "libreloclive*!reloc_live_square"), FTJIT_OK) << ftjit_last_error();
  EXPECT_NE(square_before, bytes_at(reinterpret_cast<void*>(t.square), 16));
  const char* inc[] = {"libreloclive*!reloc_live_sum"};
  const ftjit_filter f{inc, 1, nullptr, 0};
  ASSERT_EQ(ftjit_set_filter(engine_.e, &ops, &f), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(square_before, bytes_at(reinterpret_cast<void*>(t.square), 16));
  EXPECT_NE(sum_before, bytes_at(reinterpret_cast<void*>(t.sum), 16));
  t_hits[0] = 0;
  const long data[3] = {1, 2, 3};
  EXPECT_EQ(t.sum(data, 3), 6);
  EXPECT_EQ(t.square(4), 16);
  EXPECT_EQ(t_hits[0], 1u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(sum_before, bytes_at(reinterpret_cast<void*>(t.sum), 16));
}

#if defined(__riscv)
// riscv64's two entry branches: a jal (4 bytes) to a stub within +-1 MiB,
// where the engine puts one when it can, else auipc t0 + jalr x0 (8 bytes)
// to one within +-2 GiB (reloc_far_entry: 1.5 MiB of the library's own
// text on each side). Both run, count and are written back.
TEST_F(RelocatedLive, Riscv64EntriesBranchByJalOrAuipcJalrByTheStubsDistance) {
  // Near: at the library's start, with free memory below it (the end of
  // the library's text may have other mappings just above it).
  void* const near_fn = dlsym(target().handle, "reloc_pc_auipc_ld");
  void* const far_fn = dlsym(target().handle, "reloc_far_entry");
  ASSERT_NE(near_fn, nullptr);
  ASSERT_NE(far_fn, nullptr);
  const auto near = reinterpret_cast<long (*)(long)>(near_fn);
  const auto far = reinterpret_cast<long (*)(long)>(far_fn);
  const auto word = [](const void* fn, int k) {
    uint32_t w;
    std::memcpy(&w, static_cast<const uint8_t*>(fn) + 4 * k, 4);
    return w;
  };
  const long want = near(5);
  const std::vector<uint8_t> near_before = bytes_at(near_fn);
  const std::vector<uint8_t> far_before = bytes_at(far_fn);
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  const char* inc[] = {"libreloclive*!reloc_pc_auipc_ld", "libreloclive*!reloc_far_entry"};
  const ftjit_filter filter{inc, 2, nullptr, 0};
  ASSERT_EQ(ftjit_attach(engine_.e, &ops, &filter), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(ftjit_ops_site_count(engine_.e, &ops), 2);
  EXPECT_EQ(word(near_fn, 0) & 0xfff, 0x06fu) << std::hex << word(near_fn, 0) << ": not jal x0";
  EXPECT_EQ(word(far_fn, 0) & 0xfff, 0x297u) << std::hex << word(far_fn, 0) << ": not auipc t0";
  EXPECT_EQ(word(far_fn, 1) & 0xfffff, 0x28067u) << std::hex << word(far_fn, 1) << ": not jalr x0, (t0)";
  t_hits[0] = 0;
  for (long i = 0; i < 100; ++i) {
    ASSERT_EQ(near(5), want);
    ASSERT_EQ(far(i), i + 10);
  }
  EXPECT_EQ(t_hits[0], 200u);
  ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(near_before, bytes_at(near_fn));
  EXPECT_EQ(far_before, bytes_at(far_fn));
  EXPECT_EQ(far(1), 11);
}
#endif

// Every PC-relative form an entry may start with, relocated into a stub
// and run there (arm64 under qemu-aarch64): the same results as in place,
// for each direction of a conditional branch, and one callback a call.
TEST_F(RelocatedLive, PcRelativeEntriesRunTheSameFromTheStub) {
  const char* const names[] = {
      // x86-64
      "reloc_pc_rip_load", "reloc_pc_rip_cmp_imm", "reloc_pc_rip_lea", "reloc_pc_jcc_fwd", "reloc_pc_jcc_back",
      // arm64
      "reloc_pc_adr", "reloc_pc_adrp", "reloc_pc_ldr_x", "reloc_pc_ldr_w", "reloc_pc_ldr_sw", "reloc_pc_ldr_d",
      "reloc_pc_cbz_fwd", "reloc_pc_tbnz_back",
      // riscv64
      "reloc_pc_auipc_addi", "reloc_pc_auipc_ld", "reloc_pc_auipc_split", "reloc_pc_beq_fwd", "reloc_pc_bne_back",
      "reloc_pc_c_beqz_fwd", "reloc_pc_c_bnez_back"};
  int run = 0;
  for (const char* name : names) {
    auto fn = reinterpret_cast<long (*)(long)>(dlsym(target().handle, name));
    if (fn == nullptr) continue;  // the other ISA's
    const long args[] = {0, 1, 40};
    long want[3];
    for (int k = 0; k < 3; ++k) want[k] = fn(args[k]);
    ftjit_ops ops;
    relocating_counter(&ops, 0);
    const std::string pattern = std::string("libreloclive*!") + name;
    ASSERT_EQ(attach(engine_.e, &ops, pattern.c_str()), FTJIT_OK) << name << ": " << ftjit_last_error();
    t_hits[0] = 0;
    for (int k = 0; k < 3; ++k) EXPECT_EQ(fn(args[k]), want[k]) << name << "(" << args[k] << ") from its stub";
    EXPECT_EQ(t_hits[0], 3u) << name;
    ASSERT_EQ(ftjit_detach(engine_.e, &ops), FTJIT_OK) << ftjit_last_error();
    for (int k = 0; k < 3; ++k) EXPECT_EQ(fn(args[k]), want[k]) << name << "(" << args[k] << ") restored";
    ++run;
  }
  EXPECT_GE(run, 5);
}

}  // namespace
