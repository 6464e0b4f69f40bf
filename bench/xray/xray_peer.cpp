// SPDX-License-Identifier: MIT
// ftjit-bench's peer: LLVM XRay (clang-16's runtime) on bench_leaf's body,
// timed as ftjit-bench times ftjit (thread CPU time, calls through a
// volatile pointer, medians of repetitions, overhead over the untraced
// copy of the same run). Built by bench/CMakeLists.txt with clang++-16 when
// its XRay runtime is installed; run by ftjit-bench's peers section, which
// sets these rows beside ftjit's own:
//
//   count    entry sled only, a handler that counts calls per function in
//            per-thread counters (what ftjit's `count` does)
//   hist     entry and exit sleds, a handler that reads the TSC at entry
//            and puts entry-to-exit cycles into a per-function log2
//            histogram at exit (what ftjit's `latency` does)
//   empty    entry and exit sleds, a handler that returns (the seed's
//            "empty handler": ftjit's hooks section, entry+exit)
//
//   xray_peer --calls N --reps R
//   prints "base PER_CALL_NS" then "<row> PER_CALL_NS OVERHEAD_NS MIN MAX"
//   lines; exits 1 with a message if a handler missed or added a call.
#include <x86intrin.h>
#include <xray/xray_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "xray_leaves.h"

extern "C" __attribute__((noinline)) int xray_leaf_plain(int x) { return x * 3 + 1; }

namespace {

volatile int g_sink;
using Leaf = int (*)(int);

constexpr int kFunctions = 64;
thread_local uint64_t t_counts[kFunctions];
thread_local uint64_t t_entered_at[64];
thread_local unsigned t_depth;
thread_local uint64_t t_hist[kFunctions][64];

void count_handler(int32_t fid, XRayEntryType type) {
  if (type == XRayEntryType::ENTRY) ++t_counts[fid & (kFunctions - 1)];
}

void hist_handler(int32_t fid, XRayEntryType type) {
  if (type == XRayEntryType::ENTRY) {
    t_entered_at[t_depth++ & 63] = __rdtsc();
  } else if (t_depth != 0) {
    const uint64_t cycles = __rdtsc() - t_entered_at[--t_depth & 63];
    ++t_hist[fid & (kFunctions - 1)][63 - __builtin_clzll(cycles | 1)];
  }
}

void empty_handler(int32_t, XRayEntryType) {}

double cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double per_call(Leaf leaf, long n) {
  Leaf volatile fn = leaf;
  int acc = 0;
  const double t0 = cpu_ns();
  for (long i = 0; i < n; ++i) acc += fn(static_cast<int>(i));
  const double t1 = cpu_ns();
  g_sink = acc;
  return (t1 - t0) / static_cast<double>(n);
}

struct Summary {
  double median, min, max;
};

Summary reps(Leaf leaf, long n, int r) {
  per_call(leaf, n / 4);  // warm-up
  std::vector<double> v;
  for (int i = 0; i < r; ++i) v.push_back(per_call(leaf, n));
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 1000000;
  int nreps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) nreps = std::atoi(argv[i + 1]);
  }
  if (calls <= 0 || nreps <= 0) {
    std::fprintf(stderr, "xray peer: --calls and --reps must be positive\n");
    return 1;
  }
  struct Case {
    const char* name;
    void (*handler)(int32_t, XRayEntryType);
    Leaf leaf;
  };
  const Case cases[] = {{"count", count_handler, xray_leaf_entry},
                        {"hist", hist_handler, xray_leaf_full},
                        {"empty", empty_handler, xray_leaf_full}};
  std::vector<double> base;
  const Summary first = reps(xray_leaf_plain, calls, nreps);
  base.push_back(first.median);
  struct Measured {
    const Case* c;
    Summary s;
  };
  std::vector<Measured> measured;
  for (const Case& c : cases) {
    if (__xray_set_handler(c.handler) == 0 || __xray_patch() != XRayPatchingStatus::SUCCESS) {
      std::fprintf(stderr, "xray peer: cannot patch the XRay sleds\n");
      return 1;
    }
    std::memset(t_counts, 0, sizeof t_counts);
    const Summary s = reps(c.leaf, calls, nreps);
    __xray_unpatch();
    __xray_remove_handler();
    if (c.handler == count_handler) {
      uint64_t counted = 0;
      for (uint64_t n : t_counts) counted += n;
      const uint64_t want = static_cast<uint64_t>(calls / 4) + static_cast<uint64_t>(calls) * nreps;
      if (counted != want) {
        std::fprintf(stderr, "xray peer: the counting handler saw %llu calls, want %llu\n",
                     static_cast<unsigned long long>(counted), static_cast<unsigned long long>(want));
        return 1;
      }
    }
    measured.push_back({&c, s});
  }
  base.push_back(reps(xray_leaf_plain, calls, nreps).median);
  std::sort(base.begin(), base.end());
  const double b = (base[0] + base[1]) / 2;
  std::printf("base %.3f\n", b);
  for (const Measured& m : measured) {
    std::printf("%s %.3f %.3f %.3f %.3f\n", m.c->name, m.s.median, m.s.median - b, m.s.min, m.s.max);
  }
  return 0;
}
