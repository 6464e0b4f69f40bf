// SPDX-License-Identifier: MIT
// StopWait: the pause between two looks (waitpid WNOHANG) at a tracee that
// has not stopped yet, ended early by the stop itself.
//
// A ptrace stop sends the tracer SIGCHLD. With SIGCHLD blocked in this
// thread for the wait's life, sigtimedwait sleeps until it comes or the
// pause is over, whichever is first: a stop is seen within microseconds,
// where a sleep on the clock saw it only when the sleep ended (timer slack
// included, 60 us at least). Following dlopen's system calls takes some
// hundred stops, so that sum was most of `ftjit attach`'s injection.
//
// The pause still doubles (10 us .. max) so that a missed signal (another
// thread of this process took it) costs no more than the clock did. A
// SIGCHLD left pending at the end is delivered when the mask is restored:
// the CLI ignores it (default action), and waitpid sees the same stops.
#pragma once

#include <signal.h>
#include <time.h>

#include <algorithm>

namespace ftjit::inject::detail {

class StopWait {
 public:
  explicit StopWait(long long max_ns) : max_ns_(max_ns) {
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    blocked_ = ::pthread_sigmask(SIG_BLOCK, &child, &old_) == 0;
  }
  StopWait(const StopWait&) = delete;
  StopWait& operator=(const StopWait&) = delete;
  ~StopWait() {
    if (blocked_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

  // Returns when a SIGCHLD comes or the pause is over.
  void pause() {
    const timespec ts{static_cast<time_t>(ns_ / 1'000'000'000), static_cast<long>(ns_ % 1'000'000'000)};
    if (blocked_) {
      sigset_t child;
      sigemptyset(&child);
      sigaddset(&child, SIGCHLD);
      (void)::sigtimedwait(&child, nullptr, &ts);  // EAGAIN (time) or EINTR: look again either way
    } else {
      ::nanosleep(&ts, nullptr);
    }
    ns_ = std::min(ns_ * 2, max_ns_);
  }

 private:
  long long ns_ = 10'000;
  long long max_ns_;
  sigset_t old_{};
  bool blocked_ = false;
};

}  // namespace ftjit::inject::detail
