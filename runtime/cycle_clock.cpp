// SPDX-License-Identifier: MIT
// The cycle counter as a clock (see cycle_clock.h); "tsc" below is
// arch::cycle_counter(), the TSC on x86-64.
//
//   ns = base_ns + ((tsc - base_tsc) * mult) >> 32
//
// mult is ns per tick in 32.32 fixed point, measured over 10 ms or more; the
// product is taken in 128 bits, so no tick count overflows it.
#include "runtime/cycle_clock.h"

#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/arch/arch.h"

namespace ftjit {
namespace {

struct Calibration {
  uint64_t base_tsc;
  uint64_t base_ns;
  uint64_t mult;    // ns per tick, 32.32
  uint64_t mult16;  // the same, 16.16: right after mult (cycle_clock.h)
};
static_assert(offsetof(Calibration, mult16) == offsetof(Calibration, mult) + 8);

Calibration g_cal;
std::atomic<bool> g_use_tsc{false};     // for monotonic_ns
std::atomic<bool> g_deltas_ok{false};   // for durations
std::once_flag g_once;

uint64_t clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

bool kernel_uses_tsc() {
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (f == nullptr) return false;
  char buf[32] = {};
  const char* want = arch::cycle_counter_clocksource();
  const size_t n = std::strlen(want);
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr && std::strncmp(buf, want, n) == 0 &&
                  buf[n] == '\n';
  std::fclose(f);
  return ok;
}

// FTJIT_TRUST_CYCLE_COUNTER=1: the user vouches that the counter's deltas
// are durations where the kernel does not use it as its clocksource (a VM
// booted with tsc=unstable or clocksource=kvm-clock on an invariant TSC).
// Durations only: the host's clock stays the kernel's.
bool user_trusts_counter() {
  const char* env = std::getenv("FTJIT_TRUST_CYCLE_COUNTER");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

// A (tsc, ns) pair read as close together as the two reads allow: the
// tightest of a few tries.
void paired_read(uint64_t* tsc, uint64_t* ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const uint64_t t0 = arch::cycle_counter();
    const uint64_t n = clock_ns();
    const uint64_t t1 = arch::cycle_counter();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *tsc = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

// The first pair, read when the library is loaded. The calibration's
// ~10 ms window then runs from there, behind whatever the process did
// since: an agent injected by `ftjit attach` is asked to attach some ten
// milliseconds after its load, and slept those 10 ms again on the first
// attach. A window that is still short is topped up with a sleep; one of
// more than 10 s (a library loaded long before its first engine; a
// machine suspended meanwhile would break the ratio) is not used.
constexpr uint64_t kWindowNs = 10'000'000;
constexpr uint64_t kLongestWindowNs = 10'000'000'000;

struct LoadTimePair {
  uint64_t tsc = 0;
  uint64_t ns = 0;
  LoadTimePair() { paired_read(&tsc, &ns); }
};
const LoadTimePair g_at_load;

}  // namespace

bool cycle_counter_is_clock() {
  static const bool is_clock = kernel_uses_tsc();
  return is_clock;
}

bool cycle_deltas_trustworthy() {
  return cycle_counter_is_clock() || arch::cycle_counter_is_global() || user_trusts_counter();
}

void calibrate_cycle_clock() {
  std::call_once(g_once, [] {
    uint64_t tsc0 = g_at_load.tsc, ns0 = g_at_load.ns, tsc1, ns1;
    if (ns0 == 0 || clock_ns() - ns0 > kLongestWindowNs) paired_read(&tsc0, &ns0);
    if (const uint64_t waited = clock_ns() - ns0; waited < kWindowNs) {
      const timespec pause{0, static_cast<long>(kWindowNs - waited)};
      nanosleep(&pause, nullptr);
    }
    paired_read(&tsc1, &ns1);
    if (tsc1 <= tsc0 || ns1 <= ns0) return;
    g_cal.base_tsc = tsc1;
    g_cal.base_ns = ns1;
    g_cal.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(ns1 - ns0) << 32) /
                                       (tsc1 - tsc0));
    g_cal.mult16 = g_cal.mult >> 16;
    g_deltas_ok.store(cycle_deltas_trustworthy(), std::memory_order_release);
    g_use_tsc.store(cycle_counter_is_clock(), std::memory_order_release);
  });
}

bool cycle_deltas_trusted() { return g_deltas_ok.load(std::memory_order_acquire); }

const uint64_t* cycle_ns_mult() { return &g_cal.mult; }

uint64_t cycles_to_ns(uint64_t ticks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * g_cal.mult) >> 32);
}

uint64_t monotonic_ns() {
  if (!g_use_tsc.load(std::memory_order_acquire)) return clock_ns();
  const uint64_t ticks = arch::cycle_counter() - g_cal.base_tsc;
  return g_cal.base_ns +
         static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * g_cal.mult) >> 32);
}

}  // namespace ftjit
