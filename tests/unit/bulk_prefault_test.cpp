// SPDX-License-Identifier: MIT
// BulkPrefaultScope (core/bulk_prefault.h): inside a started scope a large
// bulk array is faulted in without being touched, its contents stay what
// its maker writes, arrays freed while queued or being populated are
// withdrawn safely (from several threads at once), no helper runs
// outside a scope or outlives one, and a child forked inside a scope
// starts from a state of its own (that a leak checker sees as held).
#include "core/bulk_prefault.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/bulk_memory.h"
#include "tests/unit/smaps_field.h"

namespace ftjit {
namespace {


// Resident KiB of the mapping that holds `p` (/proc/self/smaps), -1 if none.
long rss_kb_of(const void* p) {
  const std::string rss = smaps_field_of(p, "Rss:");
  return rss.empty() ? -1 : std::stol(rss.substr(4));
}

size_t threads_of_this_process() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// Whether this kernel populates on request (5.14 and later).
bool kernel_populates() {
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool ok = ::madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
  ::munmap(p, 4096);
  return ok;
}

constexpr size_t kWords = (size_t{32} << 20) / sizeof(uint64_t);  // 32 MB

TEST(BulkPrefault, AStartedScopeFaultsInAnArrayItsMakerFills) {
#if defined(FTJIT_TEST_ASAN)
  GTEST_SKIP() << "under ASan the arrays stay on the heap: nothing to prefault";
#endif
  if (!kernel_populates()) GTEST_SKIP() << "no MADV_POPULATE_WRITE in this kernel";
  const size_t threads_before = threads_of_this_process();
  {
    BulkPrefaultScope scope;
    bulk_prefault_start();
    BulkVector<uint64_t> v;
    v.reserve(kWords);  // mapped, not touched by this thread
    long rss = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((rss = rss_kb_of(v.data())) < static_cast<long>(kWords * 8 / 1024) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GE(rss, static_cast<long>(kWords * 8 / 1024)) << "the helper did not populate the array";
    for (size_t i = 0; i < kWords; ++i) v.push_back(i * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < kWords; ++i) ASSERT_EQ(v[i], i * 0x9e3779b97f4a7c15ull) << i;
  }
  EXPECT_EQ(threads_of_this_process(), threads_before) << "the helper outlived its scope";
}

TEST(BulkPrefault, WithoutAScopeNothingIsFaultedIn) {
#if defined(FTJIT_TEST_ASAN)
  GTEST_SKIP() << "under ASan the arrays stay on the heap";
#endif
  bulk_prefault_start();  // no scope: no helper
  BulkVector<uint64_t> v;
  v.reserve(kWords);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(rss_kb_of(v.data()), 4096) << "populated without a scope";
}

// Arrays made and freed at once, while the helper has them queued or is
// inside them, by two threads: each array holds what its thread wrote, and
// nothing crashes (a range populated after its munmap could land in a
// later mapping; TSan checks the locking).
TEST(BulkPrefault, ArraysFreedWhileQueuedOrPopulatedAreWithdrawn) {
  const size_t threads_before = threads_of_this_process();
  {
    BulkPrefaultScope scope;
    bulk_prefault_start();
    auto churn = [](uint64_t seed) {
      for (int round = 0; round < 40; ++round) {
        std::vector<BulkVector<uint64_t>> arrays(4);
        for (auto& a : arrays) a.reserve((size_t{6} << 20) / sizeof(uint64_t));
        arrays[1] = {};  // freed while queued or being populated
        arrays[3].shrink_to_fit();
        for (size_t i = 0; i < 1000; ++i) arrays[0].push_back(seed + i);
        for (size_t i = 0; i < 1000; ++i) {
          if (arrays[0][i] != seed + i) return false;
        }
        seed += 7;
      }
      return true;
    };
    bool other_ok = false;
    std::thread other([&] { other_ok = churn(1u << 20); });
    const bool ok = churn(1);
    other.join();
    EXPECT_TRUE(ok);
    EXPECT_TRUE(other_ok);
  }
  EXPECT_EQ(threads_of_this_process(), threads_before);
}

// A child forked while the parent's helper runs has no helper and maybe a
// held lock: it starts its own scope and helper, and exits cleanly (under
// ASan, LeakSanitizer checks at that exit that the parent's state, which
// the child still holds, is not reported lost).
TEST(BulkPrefault, AChildForkedInsideAScopeStartsItsOwn) {
  BulkPrefaultScope scope;
  bulk_prefault_start();
  BulkVector<uint64_t> parents;
  parents.reserve(kWords);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int status = 0;
    {
      BulkPrefaultScope own;
      bulk_prefault_start();
      BulkVector<uint64_t> v;
      v.reserve(kWords / 4);
      for (size_t i = 0; i < 1000; ++i) v.push_back(i);
      for (size_t i = 0; i < 1000; ++i) status |= v[i] != i;
    }
    std::exit(status);  // not _exit: at exit the leak checker runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "(23: a leak reported in the child)";
}

}  // namespace
}  // namespace ftjit
