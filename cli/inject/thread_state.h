// SPDX-License-Identifier: MIT
// The per-ISA half of ThreadCall (thread_call.h): a stopped thread's own
// state as ptrace reads it, the signal frame that gives it back through
// rt_sigreturn, and the registers that enter a call returning into that
// frame. Declared here, defined in cli/inject/<isa>/thread_state.cpp
// (CMake picks the folder: FTJIT_ARCH). The hijack itself (seizing, the
// safe point, following the call, errno, the way out) is the same on every
// ISA: cli/inject/thread_call.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace ftjit::inject::detail {

// The system call numbers (as /proc/TID/syscall shows them) of the waits a
// thread is best borrowed from: they restart exactly as they would without
// us and hold no lock of the loader or malloc.
bool waits_for_the_outside(long nr);
// Waits that may hold a restart block (a relative timeout): rt_sigreturn
// forgets it, so the wait is restarted whole (it takes longer, it does not
// fail). Second best.
bool waits_with_timeout(long nr);

// A signal frame to write onto the thread's stack.
struct CallFrame {
  uint64_t address = 0;        // where bytes go: the call's stack pointer
  uint64_t sigreturn_sp = 0;   // the stack pointer at its rt_sigreturn's entry
  std::vector<uint8_t> bytes;
};

class ThreadState {
 public:
  ThreadState();
  ~ThreadState();
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;

  // Reads thread tid (of pid, for messages), stopped by ptrace: every
  // register, the FP/vector state, the thread pointer, the signal mask.
  // FTJIT_E_SYSTEM when ptrace fails or the thread stands where its state
  // cannot be taken whole (retry later); FTJIT_E_UNSUPPORTED when it never
  // can be.
  [[nodiscard]] Status save(pid_t pid, pid_t tid);

  uint64_t pc() const;
  uint64_t sp() const;
  uint64_t thread_pointer() const;
  // "" or what of the thread's state a frame would not give back (arm64:
  // SVE state in use): such a thread is not borrowed.
  const std::string& state_a_frame_loses() const;

  // The frame that gives the saved state back, ending at or below `top`
  // (16-byte aligned); the call returns through restore_rt into its
  // rt_sigreturn.
  CallFrame frame_below(uint64_t top, uint64_t restore_rt) const;

  // Sets the registers that run function(args...) (up to 6 integer
  // arguments) on `frame`, returning through restore_rt. 0, or ptrace's
  // errno.
  int enter_call(pid_t tid, const CallFrame& frame, uint64_t function, std::span<const uint64_t> args,
                 uint64_t restore_rt) const;

  // Puts every register, the FP/vector state and the signal mask back as
  // they were, for a call that crashed: the thread is in a signal-delivery
  // stop, outside any system call.
  void restore_in_place(pid_t tid) const;

 private:
  struct Registers;
  std::unique_ptr<Registers> r_;
};

}  // namespace ftjit::inject::detail
