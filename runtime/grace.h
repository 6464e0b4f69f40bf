// SPDX-License-Identifier: MIT
// Grace periods: the userspace analogue of ftrace's synchronize_rcu_tasks().
// Once a site no longer calls a trampoline (and the patch batch's last sync
// has run), the trampoline, the ops it passes and any snapshot a dispatcher
// reads may only be freed when no thread can still be inside them.
//
// A thread is inside while its trampoline entries exceed its exits (every
// trampoline counts an entry first and, last, an exit or its entry taken
// back when nested: runtime/thread_control.h), or while its pc lies in
// trampoline memory (the instructions before the entry count and after the
// last count; all of an inline trampoline's, which counts nothing), or
// while a signal frame it runs a handler on top of saved such a pc (the
// handler returns there: arm64 under TCG takes signals at block starts,
// which a trampoline's first instruction always is). The grace period
// interrupts every thread once to read all three, then waits until each
// busy thread's exits reach the entries it had at that moment, or until it
// is seen with none open.
#pragma once

#include <cstdint>
#include <functional>

#include "core/error.h"

namespace ftjit {

// Waits until no thread other than the caller can be inside code or data
// retired before the call. `in_trampoline_code(pc)` tells whether a pc lies
// in trampoline memory. Fails after `timeout_ms` (the caller must then keep
// the retired memory alive: leaking is safe, freeing is not). 30 s: on a
// loaded machine a thread running a callback from a signal handler was
// seen to need more than 5 s, and a detach that fails leaves the plugin
// attached for the user to retry; waiting is the better answer.
Status wait_for_grace_period(const std::function<bool(uint64_t pc)>& in_trampoline_code,
                             int timeout_ms = 30000);

}  // namespace ftjit
