// SPDX-License-Identifier: MIT
// Acting on every other thread of the process from inside it: park them all
// (stop-the-world, with a program-counter fix-up), take a snapshot of where
// they are (for grace periods), or make each pass through the kernel (a
// core-serialising sync where membarrier is missing). All three use one
// real-time signal whose handler is async-signal-safe and allocates nothing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/error.h"

namespace ftjit {

// Per-thread trampoline counters: every trampoline counts an entry first
// and, last, either an exit or, if it ran nested, the entry taken back. A
// thread is inside a trampoline (or a callback under one) while entries >
// exits. Two counters rather than one depth: a trampoline's entry and exit
// are not one dependency chain through memory, and exits count only the
// outermost frames, of which a thread has one open at a time (a nested
// call does not move them): a grace period waits for "exits reached the
// entries of the snapshot" or "entries == exits", which no nesting can
// fool. Initial-exec TLS, so generated code reaches them at a fixed offset
// from the thread pointer.
//
// They are the reentrancy guard too: a trampoline that finds another one
// of the thread's entries still open (entries - exits > 1 once it counted
// its own) is running under a callback, and runs no callback itself. C++
// paths that call callbacks outside a trampoline open an entry of their
// own (guard_enter in runtime/shadow_stack.h), and only when outermost.
struct TrampolineCounts {
  uint64_t entries;
  uint64_t exits;
};
extern "C" __thread TrampolineCounts ftjit_trampoline_counts
    __attribute__((tls_model("initial-exec")));

// Offset of ftjit_trampoline_counts.entries from the thread pointer
// (arch::thread_pointer, runtime/arch/arch.h); exits is 8 bytes after it.
int64_t trampoline_counts_tls_offset();

// entries - exits of the calling thread. A signal handler that runs
// between the two reads may run trampolines of its own, which advance both
// counters alike: entries is read again to see that, as the trampolines do.
inline uint64_t open_trampoline_entries() {
  const volatile uint64_t* entries = &ftjit_trampoline_counts.entries;
  const volatile uint64_t* exits = &ftjit_trampoline_counts.exits;
  for (;;) {
    const uint64_t e = *entries;
    const uint64_t x = *exits;
    if (*entries == e) return e - x;
  }
}

// mark_own_thread() (below) was called on this thread.
extern "C" __thread bool ftjit_own_thread __attribute__((tls_model("initial-exec")));

// Whether the calling thread is inside a trampoline right now (beyond the
// entry an own thread keeps open).
inline bool inside_trampoline() { return open_trampoline_entries() > (ftjit_own_thread ? 1u : 0u); }

// Makes the calling thread one of ftjit's own (the agent's control thread,
// a plugin host's writer): traced functions it calls run no callback, as
// if it were inside one for good (one entry left open), so that counts are
// the program's alone. Grace periods know such a thread by it and wait
// only for what it opened beyond that entry. Once per thread.
void mark_own_thread();

// The same for a stretch of ftjit's work on one of the program's threads
// (the agent's report at exit(), a dlopen refresh): what it calls is not
// the program's. Nests; does nothing on an own thread.
class OwnThreadScope {
 public:
  OwnThreadScope();
  ~OwnThreadScope();
  OwnThreadScope(const OwnThreadScope&) = delete;
  OwnThreadScope& operator=(const OwnThreadScope&) = delete;

 private:
  bool marked_ = false;
};

// Installs the control signal handler (idempotent). The signal is
// SIGRTMAX-3 unless FTJIT_SIGNAL names another number.
Status install_thread_control();
// Gives the control signal back to its previous action (an agent being
// unloaded; nothing may ask the threads anything after this).
void uninstall_thread_control();

// Where one thread was when the control signal reached it.
struct ThreadSnapshot {
  pid_t tid = 0;
  uint64_t pc = 0;
  uint64_t entries = 0;                  // trampoline entries at that moment
  uint64_t exits = 0;                    // and exits
  const TrampolineCounts* counts_addr = nullptr;  // its counters, in its TLS
  bool own = false;                      // mark_own_thread(): one entry is its own
  bool responded = false;                // false: the thread exited first
  // It ran a signal handler whose signal frame saved a pc for which
  // snapshot_threads' `outer_pc` holds (only when one was given).
  bool outer_hit = false;
};

// A thread that blocks the control signal (a sigwait() loop, a sanitizer's
// background thread) cannot be parked or asked. While it sits in the kernel
// it cannot run user code either, so it counts as out of the way; one that
// blocks the signal while running makes the request fail. Limitation: such
// a thread blocked in a system call from inside a tracer callback is not
// waited for by grace periods.
//
// Parks every other thread inside the control handler, asks `fixup` for
// each parked thread's new pc (0 = unchanged), runs `body`, then resumes
// them (at their new pc). A thread parked while it ran a signal handler
// whose signal frame saved a pc `fixup` would move (arch::
// outer_signal_frame_pc_matches) makes it let everyone go and try again a
// little later (at most about a second, then it goes ahead). Neither callback may allocate or take locks: a
// parked thread may hold them. Fails, running nothing, if a thread does not
// park in time. Resuming is a pass through the kernel, so parked threads
// see every byte `body` wrote.
// `strict`: a signal frame that still holds such a pc after the retries
// fails the request (FTJIT_E_UNSUPPORTED, nothing run) instead: for a
// rewrite after which the old pc would be no instruction at all.
Status stop_the_world(const std::function<uint64_t(uint64_t pc)>& fixup,
                      const std::function<void()>& body, bool strict = false);

// What a parked thread runs on itself, in its control handler, after
// `body` and before it resumes, given its interrupted context (a
// ucontext_t*): for state only the thread can reach, its registers. Async-
// signal-safe, no locks; false on failure.
using ResumeHook = bool (*)(void* ucontext);

// Parks every other thread like stop_the_world; runs `body` only if
// `may_proceed` accepts every parked thread as it stands (same rules for
// both callbacks), and then `on_resume` in each parked thread (if given;
// the failures it returned in *hook_failures). Returns whether `body` ran.
Result<bool> stop_the_world_if(const std::function<bool(const ThreadSnapshot&)>& may_proceed,
                               const std::function<void()>& body, ResumeHook on_resume = nullptr,
                               uint32_t* hook_failures = nullptr);

// Whether a snapshot's thread was inside a trampoline or callback: entries
// beyond exits, less the one an own thread keeps (mark_own_thread).
inline bool inside_beyond_own_entry(const ThreadSnapshot& t) {
  return t.entries - t.exits > (t.own ? 1u : 0u);
}

// Takes a snapshot of every other thread (each is interrupted once).
// `outer_pc` (optional; no allocation, no locks): also asked, by each
// thread, of the pcs saved in the signal frames it runs on top of
// (arch::outer_signal_frame_pc_matches): ThreadSnapshot::outer_hit.
Result<std::vector<ThreadSnapshot>> snapshot_threads(
    const std::function<bool(uint64_t pc)>* outer_pc = nullptr);

// Makes every other thread enter and leave the kernel once (a
// core-serialising event on every CPU that runs one of them).
Status signal_sync_all_threads();

// Reads a word of another thread's TLS without risking a fault if that
// thread has exited and its memory is gone. False if unreadable.
bool read_remote_word(const uint64_t* addr, uint64_t* out);

// Microseconds spent so far in stop_the_world, stop_the_world_if,
// snapshot_threads and signal_sync_all_threads together (for the attach's
// "where the time went": callers subtract two readings).
uint64_t thread_control_micros();
// How many such requests there were so far.
uint64_t thread_control_requests();

// Whether thread `tid` still exists.
bool thread_alive(pid_t tid);

}  // namespace ftjit
