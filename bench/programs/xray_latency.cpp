// SPDX-License-Identifier: MIT
// XRay's side of the programs section's latency rows: linked into
// ftjit-bench-logger-xray (logger.cpp built with -fxray-instrument
// -fxray-instruction-threshold=1: every function has XRay's entry and exit
// sleds), this file (built without them) installs a handler that does what
// ftjit's `latency` plugin does: at entry it reads the TSC onto a
// per-thread stack, at exit (or a tail call) it puts the entry-to-exit
// cycles into a log2 histogram of the function. Patched before main; with
// FTJIT_BENCH_XRAY_OFF set it patches nothing, and the same binary runs
// with its sleds as compiled (XRay's NOPs): the base XRay's cost is
// measured from. With FTJIT_BENCH_XRAY_COUNT set it counts the calls
// instead (one atomic counter: not for timing) and prints how many at exit,
// which shows the sleds were patched.
#include <x86intrin.h>
#include <xray/xray_interface.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

constexpr int kFunctions = 4096;  // function ids fold into this many histograms
constexpr int kDepth = 256;       // frames of one thread timed at once

thread_local uint64_t t_entered_at[kDepth];
thread_local unsigned t_depth;
thread_local uint64_t t_hist[kFunctions][64];

void latency_handler(int32_t fid, XRayEntryType type) {
  if (type == XRayEntryType::ENTRY) {
    t_entered_at[t_depth++ % kDepth] = __rdtsc();
  } else if (t_depth != 0 && (type == XRayEntryType::EXIT || type == XRayEntryType::TAIL)) {
    const uint64_t cycles = __rdtsc() - t_entered_at[--t_depth % kDepth];
    ++t_hist[static_cast<uint32_t>(fid) % kFunctions][63 - __builtin_clzll(cycles | 1)];
  }
}

std::atomic<uint64_t> g_calls{0};

void counting_handler(int32_t, XRayEntryType type) {
  if (type == XRayEntryType::ENTRY) g_calls.fetch_add(1, std::memory_order_relaxed);
}

void print_calls() {
  std::fprintf(stderr, "ftjit-bench-logger-xray: %llu calls\n",
               static_cast<unsigned long long>(g_calls.load()));
}

// After XRay's own initialisation (a preinit function of its runtime).
__attribute__((constructor)) void patch_every_function() {
  if (std::getenv("FTJIT_BENCH_XRAY_OFF") != nullptr) return;
  const bool count = std::getenv("FTJIT_BENCH_XRAY_COUNT") != nullptr;
  __xray_set_handler(count ? counting_handler : latency_handler);
  if (count) std::atexit(print_calls);
  if (__xray_patch() != XRayPatchingStatus::SUCCESS) {
    std::fprintf(stderr, "ftjit-bench-logger-xray: __xray_patch failed\n");
    _exit(1);
  }
}

}  // namespace
