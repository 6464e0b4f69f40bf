// SPDX-License-Identifier: MIT
// IFUNCs relocated in a live process (FTJIT_OPS_F_RELOCATE through the C
// API): an IFUNC is traced at the implementation this process resolved it
// to, under the IFUNC's name. The target (ifunc_live_target.c, stripped:
// its implementations are static functions known only by their FDEs) has
// IFUNCs the library calls itself (through an IRELATIVE word) and one it
// does not (resolved for dlsym only); libc's strlen, memset and memcpy are
// counted against calls whose return address lies in that library, which
// only this test makes (or in the sanitizer runtime that interposes them,
// where one does: its interceptor is what calls libc's).
#include <dlfcn.h>
#include <link.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"

namespace {

using MixFn = long (*)(long, long);
using StrlenFn = size_t (*)(const char*);
using MemcpyFn = void* (*)(void*, const void*, size_t);
using MemsetFn = void* (*)(void*, int, size_t);

struct Target {
  void* handle = nullptr;
  MixFn mix = nullptr, twin = nullptr, lone = nullptr, call_mix = nullptr, call_twin = nullptr;
  MixFn call_fickle = nullptr;
  StrlenFn call_strlen = nullptr;
  MemcpyFn call_memcpy = nullptr;
  MemsetFn call_memset = nullptr;
  uint64_t lo = 0, hi = 0;  // the library's executable mapping
};

int find_text(dl_phdr_info* info, size_t, void* arg) {
  auto* t = static_cast<Target*>(arg);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libifunclive") == nullptr) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    t->lo = info->dlpi_addr + ph.p_vaddr;
    t->hi = t->lo + ph.p_memsz;
  }
  return 1;
}

Target& target() {
  static Target t = [] {
    Target t;
    t.handle = dlopen(FTJIT_IFUNC_LIVE_TARGET, RTLD_NOW);
    if (t.handle == nullptr) return t;
    // dlsym runs each resolver: these are the implementations.
    t.mix = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_mix"));
    t.twin = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_twin"));
    t.lone = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_lone"));
    t.call_mix = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_call_mix"));
    t.call_twin = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_call_twin"));
    t.call_fickle = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_call_fickle"));
    t.call_strlen = reinterpret_cast<StrlenFn>(dlsym(t.handle, "ifl_call_strlen"));
    t.call_memcpy = reinterpret_cast<MemcpyFn>(dlsym(t.handle, "ifl_call_memcpy"));
    t.call_memset = reinterpret_cast<MemsetFn>(dlsym(t.handle, "ifl_call_memset"));
    dl_iterate_phdr(find_text, &t);
    return t;
  }();
  return t;
}

long mix_expected(long a, long b) {
  long r = a;
  for (long i = 0; i < (b & 7); ++i) r = r * 31 + b;
  return r ^ 0x5a;
}
long lone_expected(long a, long b) {
  long r = b;
  for (long i = 0; i < (a & 3); ++i) r += a * i;
  return r + 1;
}

std::vector<uint8_t> bytes_at(const void* fn, size_t n = 32) {
  const auto* p = static_cast<const uint8_t*>(fn);
  return std::vector<uint8_t>(p, p + n);
}

// libc's own definition of `name`, as libc's scope resolves it. RTLD_DEFAULT
// finds a sanitizer runtime's interceptor first where one interposes it.
void* libc_symbol(const char* name) {
  static void* const libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  return libc != nullptr ? dlsym(libc, name) : nullptr;
}

struct Text {
  uint64_t addr = 0, lo = 0, hi = 0;
};
int find_holder(dl_phdr_info* info, size_t, void* arg) {
  auto* t = static_cast<Text*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0 || t->addr < lo || t->addr >= lo + ph.p_memsz) continue;
    t->lo = lo;
    t->hi = lo + ph.p_memsz;
    return 1;
  }
  return 0;
}
// The executable mapping of the module holding `addr`.
Text text_holding(const void* addr) {
  Text t{reinterpret_cast<uint64_t>(addr)};
  dl_iterate_phdr(find_holder, &t);
  return t;
}

// Per ops (private_data): every hit, and those returning into the target
// library or into the interceptor its calls may go through; the last site
// entered.
std::atomic<uint64_t> g_hits[3], g_from_lib[3];
std::atomic<uint64_t> g_site[3];
std::atomic<uint64_t> g_interceptor_lo[3], g_interceptor_hi[3];

void count(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs*) {
  const auto k = reinterpret_cast<uintptr_t>(ops->private_data);
  g_hits[k].fetch_add(1, std::memory_order_relaxed);
  if ((parent_ip >= target().lo && parent_ip < target().hi) ||
      (parent_ip >= g_interceptor_lo[k].load(std::memory_order_relaxed) &&
       parent_ip < g_interceptor_hi[k].load(std::memory_order_relaxed)))
    g_from_lib[k].fetch_add(1, std::memory_order_relaxed);
  g_site[k].store(ip, std::memory_order_relaxed);
}

void relocating_counter(ftjit_ops* ops, uintptr_t which, Text interceptor = {}) {
  ftjit_ops_init(ops);
  ops->func = count;
  ops->private_data = reinterpret_cast<void*>(which);
  ops->flags |= FTJIT_OPS_F_RELOCATE;
  g_hits[which] = 0;
  g_from_lib[which] = 0;
  g_site[which] = 0;
  g_interceptor_lo[which] = interceptor.lo;
  g_interceptor_hi[which] = interceptor.hi;
}

// A callback built with TSan cannot run where libc's string functions are
// first called on a new thread: TSan's state for the thread does not exist
// yet (its shadow stack is null; __tsan_func_entry faults). Only ftjit's
// own TSan build meets this: its callbacks are instrumented.
#if defined(__SANITIZE_THREAD__)
#define SKIP_LIBC_UNDER_TSAN() \
  GTEST_SKIP() << "TSan: libc's string functions run on a new thread before TSan's state for it exists"
#else
#define SKIP_LIBC_UNDER_TSAN() (void)0
#endif

ftjit_status attach(ftjit_engine* e, ftjit_ops* ops, std::vector<const char*> patterns) {
  ftjit_filter f{patterns.data(), patterns.size(), nullptr, 0};
  return ftjit_attach(e, ops, &f);
}

class IfuncLive : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(target().handle, nullptr) << dlerror();
    ASSERT_NE(target().call_memset, nullptr);
    ASSERT_NE(target().lo, 0u);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override {
    if (engine_ != nullptr) ftjit_engine_destroy(engine_);
  }
  ftjit_engine* engine_ = ftjit_engine_create(nullptr);
};

constexpr int kThreads = 4;
constexpr int kCalls = 20000;

// Four threads call ifl_mix's implementation four ways: through dlsym's
// pointer, through the library's IRELATIVE word, and the same two of
// ifl_twin, whose resolver returns the same function. The site is named
// ifl_mix, is not the resolver, and counts every call exactly.
TEST_F(IfuncLive, TheImplementationIsTracedUnderTheIfuncsName) {
  const Target& t = target();
  ASSERT_EQ(t.mix, t.twin) << "both resolvers return mix_impl";
  const std::vector<uint8_t> before = bytes_at(reinterpret_cast<void*>(t.mix));
  ftjit_ops ops;
  relocating_counter(&ops, 0);
  ASSERT_EQ(attach(engine_, &ops, {"libifunclive*!ifl_mix"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), 1);
  EXPECT_NE(before, bytes_at(reinterpret_cast<void*>(t.mix))) << "the implementation's entry was not written";
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kCalls; ++i) {
        const long a = i + w, b = i & 15;
        const long want = mix_expected(a, b);
        if (t.mix(a, b) != want || t.twin(a, b) != want || t.call_mix(a, b) != want + 1 ||
            t.call_twin(a, b) != want + 1)
          wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(g_hits[0].load(), uint64_t{4} * kThreads * kCalls);
  EXPECT_EQ(g_from_lib[0].load(), uint64_t{2} * kThreads * kCalls);
  const char* name = ftjit_site_name(engine_, g_site[0].load());
  EXPECT_STREQ(name != nullptr ? name : "(none)", "ifl_mix");
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, bytes_at(reinterpret_cast<void*>(t.mix))) << "not restored";
  EXPECT_EQ(t.call_mix(3, 5), mix_expected(3, 5) + 1);
  EXPECT_EQ(g_hits[0].load(), uint64_t{4} * kThreads * kCalls);
}

// Two IFUNCs of one implementation make one site (the first name); an
// IFUNC the library never calls (no IRELATIVE word) is resolved as dlsym
// resolves it. Detach restores both entries.
TEST_F(IfuncLive, OneSitePerImplementationAndTheLoneOneByDlsym) {
  const Target& t = target();
  const std::vector<uint8_t> before_mix = bytes_at(reinterpret_cast<void*>(t.mix));
  const std::vector<uint8_t> before_lone = bytes_at(reinterpret_cast<void*>(t.lone));
  ftjit_ops ops;
  relocating_counter(&ops, 1);
  ASSERT_EQ(attach(engine_, &ops, {"libifunclive*!ifl_mix", "libifunclive*!ifl_twin", "libifunclive*!ifl_lone"}),
            FTJIT_OK)
      << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), 2);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kCalls; ++i)
        if (t.lone(i, w) != lone_expected(i, w) || t.twin(i, w) != mix_expected(i, w)) wrong.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(g_hits[1].load(), uint64_t{2} * kThreads * kCalls);
  g_site[1] = 0;
  t.lone(1, 2);
  const char* lone = ftjit_site_name(engine_, g_site[1].load());
  EXPECT_STREQ(lone != nullptr ? lone : "(none)", "ifl_lone");
  t.twin(1, 2);
  const char* twin = ftjit_site_name(engine_, g_site[1].load());
  EXPECT_STREQ(twin != nullptr ? twin : "(none)", "ifl_mix");
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before_mix, bytes_at(reinterpret_cast<void*>(t.mix)));
  EXPECT_EQ(before_lone, bytes_at(reinterpret_cast<void*>(t.lone)));
}

long fickle_first(long a, long b) {
  long r = a;
  for (long i = 0; i < (b & 7); ++i) r = r * 3 + b;
  return r + 7;
}
long fickle_later(long a, long b) {
  long r = b;
  for (long i = 0; i < (a & 7); ++i) r = r * 5 - a;
  return r - 7;
}

// ifl_fickle's resolver gave the loader (the IRELATIVE word, which the
// library's calls go through) one function and gives every later lookup
// another: the one traced is the word's, what the process's calls reach.
// Tracing what a fresh dlsym returns would count the other calls.
TEST_F(IfuncLive, TheImplementationIsTheOneTheProcessCalls) {
  const Target& t = target();
  const auto later = reinterpret_cast<MixFn>(dlsym(t.handle, "ifl_fickle"));
  ASSERT_NE(later, nullptr);
  ASSERT_EQ(later(3, 5), fickle_later(3, 5)) << "the resolver's later answer";
  ftjit_ops ops;
  relocating_counter(&ops, 2);
  ASSERT_EQ(attach(engine_, &ops, {"libifunclive*!ifl_fickle"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &ops), 1);
  int wrong = 0;
  for (long i = 0; i < 1000; ++i) {
    wrong += t.call_fickle(i, i >> 3) != fickle_first(i, i >> 3) + 1;
    wrong += later(i, 2) != fickle_later(i, 2);
    wrong += later(i, 3) != fickle_later(i, 3);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(g_hits[2].load(), 1000u) << "not the function behind the IRELATIVE word";
  EXPECT_EQ(g_from_lib[2].load(), 1000u);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK) << ftjit_last_error();
}

// libc's strlen, memset and memcpy, relocated at the implementations this
// process uses. Everything in the process calls them (ftjit too); the
// calls whose return address lies in the target library are exactly ours.
// memcpy's implementation may be one the proof refuses on this CPU (x86-64
// with AVX-512: __memmove_evex_unaligned_erms, which __mempcpy's jumps
// into at +3): then the attach fails naming the refusal, and nothing of it
// is written.
//
// Under ASan, an interposed function (strlen) may be reached from the
// target library through ASan's interceptor: its calls are then those
// returning into the library or the interceptor's module, which other
// threads' calls may add to.
TEST_F(IfuncLive, LibcStrlenMemsetAndMemcpyCountExactly) {
  SKIP_LIBC_UNDER_TSAN();
  const Target& t = target();
  const char* names[3] = {"strlen", "memset", "memcpy"};
  const char* patterns[3] = {"libc.so*!strlen", "libc.so*!memset", "libc.so*!memcpy"};
  void* impl[3];
  bool interposed[3];
  std::vector<uint8_t> before[3];
  for (int k = 0; k < 3; ++k) {
    impl[k] = libc_symbol(names[k]);
    ASSERT_NE(impl[k], nullptr) << names[k];
    interposed[k] = dlsym(RTLD_DEFAULT, names[k]) != impl[k];
    before[k] = bytes_at(impl[k]);
  }
  ftjit_ops ops[3];
  bool traced[3] = {};
  for (int k = 0; k < 3; ++k) {
    if (interposed[k]) {
      const Text interceptor = text_holding(dlsym(RTLD_DEFAULT, names[k]));
      ASSERT_NE(interceptor.lo, 0u) << names[k];
      relocating_counter(&ops[k], static_cast<uintptr_t>(k), interceptor);
    } else {
      relocating_counter(&ops[k], static_cast<uintptr_t>(k));
    }
    const ftjit_status st = attach(engine_, &ops[k], {patterns[k]});
    traced[k] = st == FTJIT_OK;
    if (traced[k]) {
      EXPECT_EQ(ftjit_ops_site_count(engine_, &ops[k]), 1) << names[k];
      EXPECT_NE(before[k], bytes_at(impl[k])) << names[k] << ": the implementation's entry was not written";
    } else {
      // The refusal itself is logged (an info line naming the reason);
      // the attach only says nothing was selected.
      const std::string why = ftjit_last_error();
      std::printf("%s: not relocated here: %s\n", names[k], why.c_str());
      EXPECT_EQ(k, 2) << names[k] << ": " << why;  // strlen and memset are relocatable everywhere we run
      EXPECT_EQ(st, FTJIT_E_NO_MATCH) << why;
      EXPECT_EQ(before[k], bytes_at(impl[k]));
    }
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      char from[64], to[64];
      for (int i = 0; i < kCalls; ++i) {
        const size_t n = 1 + (i + w) % 60;
        if (t.call_memset(from, 'a' + w, n) != from) wrong.fetch_add(1);
        from[n] = '\0';
        if (t.call_strlen(from) != n + 1) wrong.fetch_add(1);
        if (t.call_memcpy(to, from, n + 1) != to || std::memcmp(to, from, n + 1) != 0) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int k = 0; k < 3; ++k) {
    if (!traced[k]) continue;
    if (interposed[k]) {
      EXPECT_GE(g_from_lib[k].load(), uint64_t{kThreads} * kCalls) << names[k] << ", through its interceptor";
    } else {
      EXPECT_EQ(g_from_lib[k].load(), uint64_t{kThreads} * kCalls) << names[k];
    }
    const char* site = ftjit_site_name(engine_, g_site[k].load());
    EXPECT_STREQ(site != nullptr ? site : "(none)", names[k]);
    std::printf("%s: %llu calls in all, %llu ours\n", names[k], static_cast<unsigned long long>(g_hits[k].load()),
                static_cast<unsigned long long>(g_from_lib[k].load()));
    ASSERT_EQ(ftjit_detach(engine_, &ops[k]), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(before[k], bytes_at(impl[k])) << names[k] << "'s implementation not restored";
  }
}

// A libc IFUNC without an IRELATIVE word (libc never calls it itself:
// x86-64 strstr; arm64 memset, memcpy) is resolved by the loader in libc's
// own scope, a module loaded at startup (a regression: its link_map is no
// handle until dlopen made it one), while strlen is already relocated.
TEST_F(IfuncLive, AWordlessLibcIfuncIsResolvedByTheLoader) {
  SKIP_LIBC_UNDER_TSAN();
#if defined(__x86_64__)
  const char* wordless = "strstr";
#else
  const char* wordless = "memset";
#endif
  void* impl = libc_symbol(wordless);
  ASSERT_NE(impl, nullptr);
  const std::vector<uint8_t> before = bytes_at(impl);
  const std::string pattern = std::string("libc.so*!") + wordless;
  ftjit_ops a, b;
  relocating_counter(&a, 0);
  relocating_counter(&b, 1);
  ASSERT_EQ(attach(engine_, &a, {"libc.so*!strlen"}), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(attach(engine_, &b, {pattern.c_str()}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &b), 1);
  EXPECT_NE(before, bytes_at(impl)) << wordless << ": not the implementation libc's scope resolves it to";
  ASSERT_EQ(ftjit_detach(engine_, &b), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(ftjit_detach(engine_, &a), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, bytes_at(impl));
}

}  // namespace
