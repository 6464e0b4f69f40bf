// SPDX-License-Identifier: MIT
// A thread's scheduling attributes as sched_getattr(2) reports them, for
// tests that check what ftjit's slice requests change and give back
// (runtime/control/latency_slice.h). The kernel's struct sched_attr (its
// first version, 48 bytes), declared here: <linux/sched/types.h> cannot be
// included beside <thread>, whose <sched.h> defines struct sched_param too.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>

namespace ftjit::test {

struct KernelSchedAttr {
  uint32_t size;
  uint32_t policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime;  // the slice (EEVDF, Linux 6.12+)
  uint64_t deadline;
  uint64_t period;
};

// Thread tid's attributes (0: the calling thread); false if it is gone.
inline bool read_sched_attr(pid_t tid, KernelSchedAttr* out) {
  *out = KernelSchedAttr{};
  return syscall(SYS_sched_getattr, tid, out, sizeof *out, 0) == 0;
}

}  // namespace ftjit::test
