// SPDX-License-Identifier: MIT
// A call run on one thread of a live process that brings the thread back
// to exactly the state it had, by itself: as a signal handler returns.
//
// The thread's state (every register, the FP/vector state, its signal
// mask, a system call it was blocked in) is written onto its own stack as
// a signal frame, below the red zone; the function is entered with the
// signal return trampoline (glibc's __restore_rt, arm64's vDSO one) as its
// return address, so that its `ret` runs rt_sigreturn on that frame. Nothing of ftjit is needed for the way back:
// if the injector is killed at any instant, the kernel detaches the thread,
// the call finishes and the thread resumes where it was stopped. While the
// injector lives it follows the call to notice its end, a crash in it, or a
// timeout, and it puts errno back, which the call may have changed (memory,
// not a register: the one thing a killed injector leaves changed). The end
// shows as a signal sent before the call and blocked during it, delivered
// when rt_sigreturn puts the thread's mask back (one the program neither
// handles nor blocks, whose default is to be ignored: harmless if we are
// killed before we drop it), or, where no signal fits and on an adopted
// thread, as the rt_sigreturn's syscall stop.
//
// Only the thread that runs the call is stopped, and only while its frame
// is written; the other threads run on, so a lock one of them holds is
// released as it would be without us. The thread is chosen where running
// the loader is safe: not inside the loader, malloc, the unwinder's FDE
// search or another lock-taking libc entry point, and with no return
// address into one on its stack (a signal handler on top of malloc, a
// dl_iterate_phdr callback). Blocked threads are preferred (a read, a poll,
// a condition wait), then computing ones.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "cli/inject/target_libc.h"
#include "core/error.h"

namespace ftjit::inject {

class ThreadCall {
 public:
  // Stops thread `tid` of pid, or (tid 0) the first thread found at a safe
  // point, retrying until `timeout` while none is. Errors:
  // FTJIT_E_INVALID_ARGUMENT (no such process, already traced, stopped by
  // SIGSTOP), FTJIT_E_UNSUPPORTED (ptrace refused), FTJIT_E_SYSTEM (no
  // thread at a safe point in time, the process exited).
  [[nodiscard]] static Result<ThreadCall> seize(pid_t pid, const detail::TargetLibc& libc, pid_t tid,
                                                std::chrono::milliseconds timeout);

  // A thread we already hold in a ptrace stop (a StoppedProcess's), the
  // other threads of the process kept stopped by the caller. The call runs
  // on it the same way; release() leaves it stopped, for its owner to let
  // go. No safety check: the caller has made its own.
  [[nodiscard]] static Result<ThreadCall> adopt(pid_t pid, const detail::TargetLibc& libc, pid_t tid);

  ThreadCall(ThreadCall&&) noexcept;
  ThreadCall& operator=(ThreadCall&&) noexcept;
  ~ThreadCall();

  pid_t tid() const;
  // The thread pointer (x86-64: fs_base): its TLS (errno, dlerror state)
  // is found from it.
  uint64_t thread_pointer() const;

  // Copies a NUL-terminated string to the thread's stack, below its red
  // zone, for the call's arguments; valid until release().
  [[nodiscard]] Result<uint64_t> push_string(std::string_view s);

  // Runs function(args...) (System V ABI, up to 6 integer arguments) and
  // waits until it has returned (the thread then stands at its
  // rt_sigreturn or just past it, still stopped: memory it changed can be
  // read). Once per
  // ThreadCall. Errors: "process N exited during injection"; a crash in
  // the call (the thread's state is put back as it was; locks the call
  // took stay taken); a timeout (the call is left to finish by itself, and
  // its thread then goes home through its frame as if we were still here).
  [[nodiscard]] Status run(uint64_t function, std::span<const uint64_t> args, std::chrono::milliseconds timeout);

  // run() in two steps: start() enters the call; finish() waits until it
  // returns, as run() does. Between them, `running_for` polls: true once
  // the call has returned, false while it runs after `patience` (so that
  // the caller can let the other threads go: one of them may hold a lock
  // the call needs).
  [[nodiscard]] Status start(uint64_t function, std::span<const uint64_t> args);
  [[nodiscard]] Result<bool> returned_within(std::chrono::milliseconds patience);
  [[nodiscard]] Status finish(std::chrono::milliseconds timeout);

  // Lets the thread go back to its own state and run on. Idempotent; the
  // destructor does it too.
  Status release();

  struct State;

 private:
  explicit ThreadCall(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ftjit::inject
