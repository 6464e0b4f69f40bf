// SPDX-License-Identifier: MIT
// Libraries loaded after attach: with watch_dlopen, dlopen returns a
// library whose sites the attached filters select already patched; dlclose
// makes the engine forget it; without the watch, ftjit_refresh_modules
// (or the next control call) does the same.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/e2e/traced.h"

extern "C" void* dlw_caller_dlopen(const char* file, int mode);
extern "C" int dlw_caller_dlclose(void* handle);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

namespace {

constexpr const char* kLib = FTJIT_DLW_FIXTURE;
constexpr const char* kLibName = FTJIT_DLW_FIXTURE_NAME;
constexpr size_t kEntryBytes = 5;  // built with -fpatchable-function-entry=5

std::atomic<int> g_calls{0};
std::atomic<uint64_t> g_ip{0};
void on_entry(uint64_t ip, uint64_t, ftjit_ops*, ftjit_regs*) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_ip.store(ip, std::memory_order_relaxed);
}

// The bytes `fn` has in the library's file.
std::vector<uint8_t> file_bytes(const void* fn, size_t n) {
  struct Q {
    uint64_t addr;
    uint64_t offset = 0;
    bool found = false;
  } q{reinterpret_cast<uint64_t>(fn)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Q*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uint64_t lo = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q->addr >= lo && q->addr < lo + ph.p_filesz) {
            q->offset = q->addr - lo + ph.p_offset;
            q->found = true;
            return 1;
          }
        }
        return 0;
      },
      &q);
  EXPECT_TRUE(q.found);
  std::ifstream f(kLib, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(q.offset));
  std::vector<uint8_t> out(n);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n));
  return out;
}

std::vector<uint8_t> mem_bytes(const void* fn, size_t n) {
  const auto* p = static_cast<const uint8_t*>(fn);
  return {p, p + n};
}

using BinFn = int (*)(int, int);
BinFn sym(void* h, const char* name) { return reinterpret_cast<BinFn>(dlsym(h, name)); }
int call(BinFn f, int a, int b) {
  BinFn volatile v = f;
  return v(a, b);
}

class DlopenWatchTest : public ::testing::Test {
 protected:
  void create(bool watch) {
    ftjit_engine_options o;
    ftjit_engine_options_init(&o);
    o.watch_dlopen = watch ? 1 : 0;
    engine_ = ftjit_engine_create(&o);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override {
    if (engine_ != nullptr) ftjit_engine_destroy(engine_);
  }
  // Attach before the library exists: the filter also names a function of
  // this executable, since a filter that selects nothing is an error.
  void attach(ftjit_ops* ops, const std::string& lib_pattern) {
    ftjit_ops_init(ops);
    ops->func = on_entry;
    patterns_ = {"traced_add", std::string(kLibName) + "!" + lib_pattern};
    const char* inc[] = {patterns_[0].c_str(), patterns_[1].c_str()};
    ftjit_filter filter{inc, 2, nullptr, 0};
    ASSERT_EQ(ftjit_attach(engine_, ops, &filter), FTJIT_OK) << ftjit_last_error();
  }
  ftjit_stats stats() {
    ftjit_stats s{};
    ftjit_get_stats(engine_, &s);
    return s;
  }
  ftjit_engine* engine_ = nullptr;
  std::vector<std::string> patterns_;
};

TEST_F(DlopenWatchTest, LibraryLoadedAfterAttachIsTraced) {
  create(true);
  ftjit_ops ops;
  attach(&ops, "dlw_*");
  const long before = ftjit_ops_site_count(engine_, &ops);
  void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before + 3);
  BinFn add = sym(h, "dlw_add"), mul = sym(h, "dlw_mul");
  ASSERT_NE(add, nullptr);
  g_calls = 0;
  EXPECT_EQ(call(add, 19, 23), 42);
  EXPECT_EQ(g_calls.load(), 1);
  EXPECT_EQ(g_ip.load(), reinterpret_cast<uint64_t>(add));
  EXPECT_EQ(call(mul, 6, 7), 43);
  EXPECT_EQ(g_calls.load(), 2);
  EXPECT_EQ(g_ip.load(), reinterpret_cast<uint64_t>(mul));
  ftjit_stats s = stats();
  EXPECT_GE(s.dlopen_refreshes, 1u);
  EXPECT_GT(s.dlopen_patch_ns, 0u);
  EXPECT_STREQ(ftjit_site_name(engine_, reinterpret_cast<uint64_t>(add)), "dlw_add");
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(mem_bytes(reinterpret_cast<void*>(add), kEntryBytes),
            file_bytes(reinterpret_cast<void*>(add), kEntryBytes));
  EXPECT_EQ(call(add, 1, 2), 3);
  EXPECT_EQ(g_calls.load(), 2);
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

TEST_F(DlopenWatchTest, NonMatchingFilterLeavesLibraryUntouched) {
  create(true);
  ftjit_ops ops;
  attach(&ops, "no_such_function");
  const long before = ftjit_ops_site_count(engine_, &ops);
  void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before);
  for (const char* name : {"dlw_add", "dlw_mul", "dlw_sub"}) {
    void* fn = reinterpret_cast<void*>(sym(h, name));
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(mem_bytes(fn, kEntryBytes), file_bytes(fn, kEntryBytes)) << name;
  }
  g_calls = 0;
  EXPECT_EQ(call(sym(h, "dlw_add"), 2, 3), 5);
  EXPECT_EQ(g_calls.load(), 0);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

TEST_F(DlopenWatchTest, DlcloseThenDlopenAgain) {
  create(true);
  ftjit_ops ops;
  attach(&ops, "dlw_add");
  const long before = ftjit_ops_site_count(engine_, &ops);
  for (int round = 0; round < 3; ++round) {
    void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before + 1) << round;
    BinFn add = sym(h, "dlw_add");
    g_calls = 0;
    EXPECT_EQ(call(add, 40, 2), 42);
    EXPECT_EQ(g_calls.load(), 1) << round;
    EXPECT_EQ(g_ip.load(), reinterpret_cast<uint64_t>(add));
    ASSERT_EQ(dlw_caller_dlclose(h), 0);
    EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before) << round;
  }
  EXPECT_GE(stats().modules_unloaded, 3u);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
}

TEST_F(DlopenWatchTest, WithoutWatchNothingHappensUntilRefresh) {
  create(false);
  ftjit_ops ops;
  attach(&ops, "dlw_*");
  const long before = ftjit_ops_site_count(engine_, &ops);
  void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  BinFn add = sym(h, "dlw_add");
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before);
  EXPECT_EQ(mem_bytes(reinterpret_cast<void*>(add), kEntryBytes),
            file_bytes(reinterpret_cast<void*>(add), kEntryBytes));
  g_calls = 0;
  EXPECT_EQ(call(add, 1, 1), 2);
  EXPECT_EQ(g_calls.load(), 0);
  EXPECT_EQ(stats().dlopen_refreshes, 0u);

  EXPECT_GE(ftjit_refresh_modules(engine_), 3) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before + 3);
  EXPECT_EQ(call(add, 1, 1), 2);
  EXPECT_EQ(g_calls.load(), 1);
  EXPECT_EQ(g_ip.load(), reinterpret_cast<uint64_t>(add));

  // Unloaded and loaded again behind the engine's back (most likely at the
  // same address): detach must neither write to the new copy nor fail.
  ASSERT_EQ(dlw_caller_dlclose(h), 0);
  h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  add = sym(h, "dlw_add");
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(mem_bytes(reinterpret_cast<void*>(add), kEntryBytes),
            file_bytes(reinterpret_cast<void*>(add), kEntryBytes));
  EXPECT_GE(stats().modules_unloaded, 1u);
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

// A sled someone else changed in a new library: that site is skipped (and
// counted), the others are traced.
TEST_F(DlopenWatchTest, ForeignPatchedSiteIsSkipped) {
  create(false);
  ftjit_ops ops;
  attach(&ops, "dlw_*");
  const long before = ftjit_ops_site_count(engine_, &ops);
  void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* sub = reinterpret_cast<uint8_t*>(sym(h, "dlw_sub"));
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(sub) & ~(page - 1));
  ASSERT_EQ(mprotect(base, page, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
  const uint8_t jmp_next[5] = {0xe9, 0, 0, 0, 0};  // still a working function
  std::memcpy(sub, jmp_next, sizeof jmp_next);
  ASSERT_EQ(mprotect(base, page, PROT_READ | PROT_EXEC), 0);

  EXPECT_GE(ftjit_refresh_modules(engine_), 3) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before + 2);
  EXPECT_GE(stats().new_module_skips, 1u);
  g_calls = 0;
  EXPECT_EQ(call(reinterpret_cast<BinFn>(sub), 5, 3), 2);
  EXPECT_EQ(g_calls.load(), 0);
  EXPECT_EQ(call(sym(h, "dlw_add"), 5, 3), 8);
  EXPECT_EQ(g_calls.load(), 1);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(std::memcmp(sub, jmp_next, sizeof jmp_next), 0);
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

// dlopen finds a bare name through the calling library's RUNPATH, which
// the wrapper must not hide (it enters dlopen as if called from there).
TEST_F(DlopenWatchTest, CallerRunpathStillApplies) {
  if (kSanitized) GTEST_SKIP() << "the sanitizer's own dlopen interceptor hides the caller";
  create(true);
  ftjit_ops ops;
  attach(&ops, "dlw_add");
  void* h = dlw_caller_dlopen(kLibName, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  g_calls = 0;
  EXPECT_EQ(call(sym(h, "dlw_add"), 1, 2), 3);
  EXPECT_EQ(g_calls.load(), 1);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

TEST_F(DlopenWatchTest, ConcurrentDlopenDlcloseAndAttachDetach) {
#if defined(__SANITIZE_THREAD__)
  // TSan holds signals back from a thread blocked on a mutex, so a thread
  // waiting for the engine lock cannot be parked by the other's
  // stop-the-world or grace period (which then time out after seconds).
  GTEST_SKIP() << "threads contending the engine lock cannot be parked under TSan";
#endif
  create(true);
  ftjit_ops lib_ops;
  attach(&lib_ops, "dlw_*");
  std::atomic<bool> stop{false};
  constexpr int kRounds = 16;
  std::atomic<int> rounds{0};
  std::thread loader([&] {
    for (int i = 0; i < kRounds; ++i) {
      void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) {
        ADD_FAILURE() << dlerror();
        break;
      }
      EXPECT_EQ(call(sym(h, "dlw_add"), 2, 2), 4);
      EXPECT_EQ(dlw_caller_dlclose(h), 0);
      rounds.fetch_add(1);
    }
    stop = true;
  });
  int cycles = 0;
  while (!stop.load()) {
    ftjit_ops ops;
    ftjit_ops_init(&ops);
    ops.func = on_entry;
    const char* inc[] = {"traced_add", "traced_noslot_mul"};
    ftjit_filter filter{inc, 2, nullptr, 0};
    ASSERT_EQ(ftjit_attach(engine_, &ops, &filter), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(traced_add(1, 2), 3);
    ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
    ++cycles;
  }
  loader.join();
  EXPECT_EQ(rounds.load(), kRounds);
  EXPECT_GT(cycles, 0);
  ASSERT_EQ(ftjit_detach(engine_, &lib_ops), FTJIT_OK) << ftjit_last_error();
}

TEST_F(DlopenWatchTest, OptionsOfAnOlderCallerAreAccepted) {
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  o.struct_size = offsetof(ftjit_engine_options, watch_dlopen);
  o.watch_dlopen = 1;  // beyond what this caller declared: ignored
  engine_ = ftjit_engine_create(&o);
  ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  ftjit_ops ops;
  attach(&ops, "dlw_add");
  const long before = ftjit_ops_site_count(engine_, &ops);
  void* h = dlw_caller_dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), before);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(dlw_caller_dlclose(h), 0);
}

// ---------------------------------------------------------------------------
// dlclose at any instant
// ---------------------------------------------------------------------------
//
// Threads dlopen the library, call into it and dlclose it without pause
// while attach, set_filter and detach run hundreds of times: whenever the
// library goes, the engine must forget it without reading or writing its
// code (it used to crash in Patcher::apply, verifying the code of a library
// that had just been dlclosed). With the watch, and without (then only the
// control calls' own look at the loader notices).

std::atomic<int> g_race_exits{0};
void on_race_exit(uint64_t, uint64_t, ftjit_ops*, ftjit_ret_regs*) {
  g_race_exits.fetch_add(1, std::memory_order_relaxed);
}

void dlclose_race(bool watch, bool exit_hooks) {
#if defined(__SANITIZE_THREAD__)
  // TSan holds signals back from a thread blocked in the loader (its lock
  // is uninstrumented): the engine's stop-the-world, run while a code
  // change holds the loader's lock, then times out; and TSan does not see
  // the loader's own locking around its frees. Checked natively and under ASan.
  GTEST_SKIP() << "threads blocked in the loader cannot be parked under TSan";
#endif
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  o.watch_dlopen = watch ? 1 : 0;
  ftjit_engine* engine = ftjit_engine_create(&o);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();

  std::atomic<bool> stop{false};
  std::atomic<long> loads{0};
  std::atomic<long> wrong{0};
  std::vector<std::thread> loaders;
  // A failed ASSERT returns early: the loaders must still be stopped and
  // joined (a joinable std::thread's destructor aborts the whole binary).
  struct JoinOnExit {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~JoinOnExit() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_on_exit{stop, loaders};
  for (int t = 0; t < 2; ++t) {
    loaders.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        void* h = dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) {
          wrong.fetch_add(1);
          continue;
        }
        if (call(sym(h, "dlw_add"), t, 3) != t + 3 || call(sym(h, "dlw_mul"), 2, 3) != 7) {
          wrong.fetch_add(1);
        }
        dlclose(h);
        loads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }

  const std::string lib_all = std::string(kLibName) + "!dlw_*";
  const std::string lib_add = std::string(kLibName) + "!dlw_add";
  const char* all[] = {"traced_add", lib_all.c_str()};
  const char* one[] = {"traced_add", lib_add.c_str()};
  ftjit_filter f_all{all, 2, nullptr, 0};
  ftjit_filter f_one{one, 2, nullptr, 0};
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = on_entry;
  if (exit_hooks) ops.exit_func = on_race_exit;
  int (*volatile add)(int, int) = traced_add;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kSanitized ? 6 : 3);
  int cycles = 0;
  for (; cycles < 300 && std::chrono::steady_clock::now() < deadline; ++cycles) {
    ASSERT_EQ(ftjit_attach(engine, &ops, &f_all), FTJIT_OK) << cycles << ": " << ftjit_last_error();
    EXPECT_EQ(add(cycles, 1), cycles + 1);
    ASSERT_EQ(ftjit_set_filter(engine, &ops, &f_one), FTJIT_OK) << cycles << ": " << ftjit_last_error();
    ASSERT_EQ(ftjit_set_filter(engine, &ops, &f_all), FTJIT_OK) << cycles << ": " << ftjit_last_error();
    ASSERT_EQ(ftjit_detach(engine, &ops), FTJIT_OK) << cycles << ": " << ftjit_last_error();
  }
  stop = true;
  for (auto& t : loaders) t.join();
  // Cycles in the time allowed vary with the machine's load (300 when
  // idle with the watch; fewer without, where every control call
  // rediscovers the modules): only check that the race ran.
  EXPECT_GE(cycles, 5);
  EXPECT_GT(loads.load(), 0);
  std::printf("%d cycles, %ld loads\n", cycles, loads.load());
  EXPECT_EQ(wrong.load(), 0);
  ftjit_stats s{};
  ftjit_get_stats(engine, &s);
  EXPECT_EQ(s.sites_enabled, 0u);
  ftjit_engine_destroy(engine);
}

// A fork after a patched library was dlclosed, before any control call
// noticed: the engine still lists the library's text alias, whose range
// is unmapped now (or holds another mapping). The child's fork handler
// must leave that range alone (it copied from it: the child died of
// SIGSEGV, one hazard-target child in a few hundred). Without the watch,
// nothing forgets the library before the fork.
TEST(DlcloseRace, ForkAfterAPatchedLibraryWasClosed) {
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  o.watch_dlopen = 0;
  ftjit_engine* engine = ftjit_engine_create(&o);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  void* h = dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  ASSERT_GE(ftjit_refresh_modules(engine), 0) << ftjit_last_error();
  const std::string lib_all = std::string(kLibName) + "!dlw_*";
  const char* all[] = {"traced_add", lib_all.c_str()};
  ftjit_filter f_all{all, 2, nullptr, 0};
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = on_entry;
  ASSERT_EQ(ftjit_attach(engine, &ops, &f_all), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call(sym(h, "dlw_add"), 1, 3), 4);
  ASSERT_EQ(dlclose(h), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int (*volatile add)(int, int) = traced_add;
    _exit(add(2, 3) == 5 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "child killed by signal " + std::to_string(WTERMSIG(status))
                              : "child status " + std::to_string(status));
  ASSERT_EQ(ftjit_detach(engine, &ops), FTJIT_OK) << ftjit_last_error();
  ftjit_engine_destroy(engine);
}

TEST(DlcloseRace, AttachSetFilterDetachWithWatch) { dlclose_race(true, false); }
TEST(DlcloseRace, AttachSetFilterDetachWithWatchAndExitHooks) { dlclose_race(true, true); }
TEST(DlcloseRace, AttachSetFilterDetachWithoutWatch) { dlclose_race(false, false); }
TEST(DlcloseRace, AttachSetFilterDetachWithoutWatchWithExitHooks) { dlclose_race(false, true); }

}  // namespace
