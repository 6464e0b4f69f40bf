// SPDX-License-Identifier: MIT
#include "runtime/control/latency_slice.h"

// The kernel's sched_attr, which glibc 2.36 does not wrap (its <sched.h>
// would redefine struct sched_param: not included here).
#include <linux/sched.h>
#include <linux/sched/types.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ftjit::control {

namespace {

constexpr unsigned long long kShortSliceNs = 100 * 1000;  // EEVDF's shortest
constexpr int kRaisedNice = -10;

// What sched_getattr reports for a thread that asked for no slice (the
// kernel's default, 0 before EEVDF's slice requests): this thread's before
// its first request. 0 until then. (GCC's atomic builtins: <atomic> would
// bring in <sched.h>.)
unsigned long long g_default_runtime = 0;

void record_default(unsigned long long runtime) {
  unsigned long long unset = 0;
  __atomic_compare_exchange_n(&g_default_runtime, &unset, runtime, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

bool get_attr(int tid, struct sched_attr* attr) {
  std::memset(attr, 0, sizeof *attr);
  return syscall(SYS_sched_getattr, tid, attr, sizeof *attr, 0) == 0;
}

// Sets thread tid's slice request, keeping its policy (SCHED_OTHER only: a
// real-time or idle thread is left alone), nice value and reset-on-fork.
bool set_runtime(int tid, unsigned long long runtime, unsigned long long* before) {
  struct sched_attr attr;
  if (!get_attr(tid, &attr) || attr.sched_policy != SCHED_NORMAL) return false;
  if (before != nullptr) *before = attr.sched_runtime;
  attr.size = sizeof attr;
  attr.sched_flags &= SCHED_FLAG_RESET_ON_FORK;
  attr.sched_runtime = runtime;
  return syscall(SYS_sched_setattr, tid, &attr, 0) == 0;
}

// The calling thread's nice value before raise_own_priority raised it.
constexpr int kNotRaised = 1000;
thread_local int g_nice_before_raise = kNotRaised;

// Thread tid's nice value, or false (a thread gone).
bool nice_of(int tid, int* nice) {
  errno = 0;
  const int n = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (n == -1 && errno != 0) return false;
  *nice = n;
  return true;
}

}  // namespace

bool request_short_slice() {
  unsigned long long before = 0;
  if (!set_runtime(0, kShortSliceNs, &before)) return false;
  if (before != kShortSliceNs) record_default(before);
  return true;
}

ShortSliceFor::ShortSliceFor(int tid) : tid_(tid) {
  // This thread's own slice, if it asked for none yet, is the default.
  struct sched_attr own;
  if (__atomic_load_n(&g_default_runtime, __ATOMIC_RELAXED) == 0 && get_attr(0, &own) &&
      own.sched_runtime != kShortSliceNs)
    record_default(own.sched_runtime);
  changed_ = tid > 0 && set_runtime(tid, kShortSliceNs, &saved_runtime_);
}

ShortSliceFor::~ShortSliceFor() {
  if (!changed_) return;
  const unsigned long long default_runtime = __atomic_load_n(&g_default_runtime, __ATOMIC_RELAXED);
  (void)set_runtime(tid_, saved_runtime_ == default_runtime ? 0 : saved_runtime_, nullptr);
}

RaisedPriorityFor::RaisedPriorityFor(int tid) : tid_(tid) {
  if (tid <= 0 || !nice_of(tid, &saved_nice_) || saved_nice_ <= kRaisedNice) return;
  changed_ = setpriority(PRIO_PROCESS, static_cast<id_t>(tid), kRaisedNice) == 0;
}

RaisedPriorityFor::~RaisedPriorityFor() {
  int now = 0;
  // Only if it still has ours: the thread may have put its own back.
  if (changed_ && nice_of(tid_, &now) && now == kRaisedNice)
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid_), saved_nice_);
}

bool raise_own_priority() {
  int now = 0;
  if (!nice_of(0, &now) || now <= kRaisedNice || setpriority(PRIO_PROCESS, 0, kRaisedNice) != 0) return false;
  if (g_nice_before_raise == kNotRaised) g_nice_before_raise = now;
  return true;
}

bool lower_own_priority() {
  if (g_nice_before_raise == kNotRaised) return false;
  (void)setpriority(PRIO_PROCESS, 0, g_nice_before_raise);
  g_nice_before_raise = kNotRaised;
  return true;
}

int own_nice() {
  int n = 0;
  return nice_of(0, &n) ? n : 0;
}

void keep_nice(int nice) {
  int now = 0;
  if (nice_of(0, &now) && now < nice) (void)setpriority(PRIO_PROCESS, 0, nice);
}

}  // namespace ftjit::control
