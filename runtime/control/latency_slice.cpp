// SPDX-License-Identifier: MIT
#include "runtime/control/latency_slice.h"

// The kernel's sched_attr, which glibc 2.36 does not wrap (its <sched.h>
// would redefine struct sched_param: not included here).
#include <linux/sched.h>
#include <linux/sched/types.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace ftjit::control {

bool request_short_slice() {
  // Keep the thread's policy and nice value: only the slice changes, and
  // only for SCHED_OTHER (a real-time or idle thread is left alone).
  struct sched_attr attr;
  std::memset(&attr, 0, sizeof attr);
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return false;
  if (attr.sched_policy != SCHED_NORMAL) return false;
  attr.size = sizeof attr;
  attr.sched_flags &= SCHED_FLAG_RESET_ON_FORK;
  attr.sched_runtime = 100 * 1000;  // ns: EEVDF's shortest slice
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

}  // namespace ftjit::control
