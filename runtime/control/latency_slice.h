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

// A short slice for thread `tid` of another process (one this process may
// schedule: the same user, or CAP_SYS_NICE) while the guard lives, then
// its own attributes back: the target's thread that runs the injected
// dlopen (cli/inject/ptrace_inject.cpp), which otherwise waits its turn
// behind every busy thread of its process. A slice the thread had of its
// own is put back as it was; the default one is put back as the default
// (a request of 0), not as a value that happens to equal it. If this
// process dies first, the thread keeps the short slice: shorter turns,
// the same share of the CPU.
class ShortSliceFor {
 public:
  explicit ShortSliceFor(int tid);
  ~ShortSliceFor();
  ShortSliceFor(const ShortSliceFor&) = delete;
  ShortSliceFor& operator=(const ShortSliceFor&) = delete;

  bool changed() const { return changed_; }

 private:
  int tid_;
  bool changed_ = false;
  unsigned long long saved_runtime_ = 0;
};

// A higher priority (nice -10) for thread `tid` of another process while
// the guard lives, where this process may raise one (CAP_SYS_NICE, as root
// has; otherwise nothing changes), then its own nice value back: the
// agent's thread while it serves an attach or a detach. A slice request
// changes when a thread runs, not how much: in a process whose threads
// keep every CPU busy, the agent's thread that parked them all for a
// stop-the-world found them owed CPU time when it let them go, and waited
// for them to catch up before it could go on (3-11 ms of an attach on the
// demo service, five busy threads on two cores). At nice -10 it weighs
// about nine of them, for the few milliseconds of the request: the sooner
// it is done, the sooner the program has its threads to itself again.
class RaisedPriorityFor {
 public:
  explicit RaisedPriorityFor(int tid);
  ~RaisedPriorityFor();
  RaisedPriorityFor(const RaisedPriorityFor&) = delete;
  RaisedPriorityFor& operator=(const RaisedPriorityFor&) = delete;

  bool changed() const { return changed_; }

 private:
  int tid_;
  bool changed_ = false;
  int saved_nice_ = 0;
};

// The same for the calling thread: `ftjit attach/detach/status/control`
// from their first constructor (cli/main.cpp), whose own turns are in the
// same chain. False if nothing changed (no privilege, or already as high).
bool raise_own_priority();

// The calling thread's nice value back to what it was before
// raise_own_priority raised it; false if it had not (nothing changed).
// `ftjit attach` while it only waits for the end of a session.
bool lower_own_priority();

// The calling thread's nice value, for keep_nice later.
int own_nice();

// Puts the calling thread's nice value back to `nice` if a
// RaisedPriorityFor whose holder was killed left it lower (lowering a
// priority needs no privilege): the agent's thread after each request.
void keep_nice(int nice);

}  // namespace ftjit::control
