// SPDX-License-Identifier: MIT
// The control path's threads (the CLI, the agent's thread) ask the
// scheduler for a short slice.
//
// An attach is a chain of hand-offs between the CLI, the agent's thread
// and the target's own threads: each one waits for the other's reply. In
// a busy process (the demo service: five threads on two cores) every
// hand-off used to wait a scheduler slice or two for a CPU: releasing the
// threads a stop-the-world parked let all five preempt the agent before
// it could send its reply (8-10 ms, twice, measured with `perf sched
// timehist`). Linux's EEVDF scheduler (6.12 and later) takes a slice
// request from a SCHED_OTHER thread (sched_attr.sched_runtime): a shorter
// slice means an earlier virtual deadline, so the thread runs soon after
// it wakes, but for shorter turns: it gets no more CPU than before, no
// privilege is needed, and the thread's nice value is kept. Older kernels
// ignore the field.
#pragma once

namespace ftjit::control {

// Asks for a short slice (100 us) for the calling thread. Best effort:
// false when the kernel refused (nothing changed then).
bool request_short_slice();

}  // namespace ftjit::control
