// SPDX-License-Identifier: MIT
// Relocated entries on BTI-guarded pages (arm64, run under qemu-aarch64,
// whose CPU has BTI and enforces PROT_BTI): bti_square of a BTI-marked
// library is relocated (its `bti c`/`paciasp` stays at the entry, the
// branch to its stub is written after it), called through a pointer, and
// written back; all the while the library's text must stay guarded, which
// bti_canary (no landing pad, same pages) shows by trapping when called
// through a pointer. ftjit rewrites a module's text through a mapping of
// its own: one made without PROT_BTI would silently unguard the pages
// (qemu-user's /proc/self/smaps has no "bt" flag to say they were; the
// file's BTI marking and the CPU's HWCAP2_BTI say it instead).
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ftjit/ftjit.h"

namespace {

sigjmp_buf g_jump;
void on_sigill(int) { siglongjmp(g_jump, 1); }

// Whether calling `fn` through a pointer traps (SIGILL): the page is
// guarded and fn has no landing pad.
bool traps(long (*volatile fn)()) {
  struct sigaction sa{}, old{};
  sa.sa_handler = on_sigill;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGILL, &sa, &old);
  bool trapped = true;
  if (sigsetjmp(g_jump, 1) == 0) {
    trapped = fn() != 42;  // 42: it ran
  }
  sigaction(SIGILL, &old, nullptr);
  return trapped;
}

thread_local uint64_t t_hits;
void count_hit(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) { ++t_hits; }

TEST(RelocatedBti, GuardedPagesStayGuardedAndTheEntryKeepsItsPad) {
  void* handle = dlopen(FTJIT_RELOC_BTI_TARGET, RTLD_NOW);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto square = reinterpret_cast<long (*volatile)(long)>(dlsym(handle, "bti_square"));
  auto canary = reinterpret_cast<long (*volatile)()>(dlsym(handle, "bti_canary"));
  ASSERT_NE(square, nullptr);
  ASSERT_NE(canary, nullptr);
  ASSERT_TRUE(traps(canary)) << "the library's text is not BTI-guarded: this test proves nothing here";
  const auto* entry = reinterpret_cast<const uint8_t*>(square);
  const std::vector<uint8_t> before(entry, entry + 16);

  ftjit_engine* e = ftjit_engine_create(nullptr);
  ASSERT_NE(e, nullptr) << ftjit_last_error();
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_hit;
  ops.flags |= FTJIT_OPS_F_RELOCATE;
  const char* inc[] = {"libreloc_bti*!bti_square"};
  const ftjit_filter filter{inc, 1, nullptr, 0};
  ASSERT_EQ(ftjit_attach(e, &ops, &filter), FTJIT_OK) << ftjit_last_error();
  ASSERT_EQ(ftjit_ops_site_count(e, &ops), 1);
  // The landing pad stays; what follows it is the branch to the stub.
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + 4, entry)) << "the entry's landing pad moved";
  EXPECT_FALSE(std::equal(before.begin() + 4, before.begin() + 8, entry + 4)) << "the entry was not rewritten";
  t_hits = 0;
  for (long i = 0; i < 1000; ++i) ASSERT_EQ(square(i), i * i);
  EXPECT_EQ(t_hits, 1000u);
  EXPECT_TRUE(traps(canary)) << "attaching unguarded the library's pages";

  ASSERT_EQ(ftjit_detach(e, &ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(before, std::vector<uint8_t>(entry, entry + 16));
  for (long i = 0; i < 100; ++i) ASSERT_EQ(square(i), i * i);
  EXPECT_EQ(t_hits, 1000u);
  EXPECT_TRUE(traps(canary)) << "detaching unguarded the library's pages";
  ftjit_engine_destroy(e);
  EXPECT_TRUE(traps(canary)) << "the engine's teardown unguarded the library's pages";
}

}  // namespace
