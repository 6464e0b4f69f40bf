// SPDX-License-Identifier: MIT
// ThreadCall: see thread_call.h for the contract. This is the part every
// ISA shares: choosing and stopping the thread, following the call (to its
// return marker, or by syscall stops), the timeout, errno put back, the
// way out. What differs per ISA (the registers, the signal frame's layout
// and where it lies, how the call is entered so that it returns into
// rt_sigreturn) is detail::ThreadState, thread_state.h, defined in
// cli/inject/<isa>/.
//
//   the chosen thread's stack during a call
//
//   original sp  ->  +----------------------------------+
//                    | red zone (InjectorIsa::red_zone) |
//                    | 512 B margin                     |
//   scratch_top  ->  +----------------------------------+
//                    | push_string() data, growing down |
//                    +----------------------------------+
//                    | the signal frame: every register |  (per ISA: the top of
//                    | as it was, the signal mask       |  <isa>/thread_state.cpp)
//   call sp      ->  +----------------------------------+
//                    | the function's own frames        |
//
// The function returns into the signal return trampoline (injector_isa.h,
// restore_rt_code), whose rt_sigreturn finds the frame exactly where a
// signal handler's return would, and loads the thread's state from it.
#include "cli/inject/thread_call.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cli/inject/inject_internal.h"
#include "cli/inject/injector_isa.h"
#include "cli/inject/stop_wait.h"
#include "cli/inject/thread_state.h"

namespace ftjit::inject {

using detail::errno_message;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kStackMargin = 512;
constexpr uint64_t kScratchLimit = 16 * 1024;
constexpr size_t kMaxFrames = 4096;
constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD

struct Candidate {
  pid_t tid;
  int rank;  // lower is better
};

// The process's threads, best first, from /proc alone (no ptrace yet).
std::vector<Candidate> rank_threads(pid_t pid) {
  std::vector<Candidate> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task.c_str());
  if (!dir) return out;
  while (dirent* de = ::readdir(dir)) {
    pid_t tid = static_cast<pid_t>(std::strtol(de->d_name, nullptr, 10));
    if (tid <= 0) continue;
    const std::string t = task + "/" + de->d_name;
    auto comm = detail::read_text_file(t + "/comm");
    if (comm && *comm == "ftjit-agent\n") continue;  // ours, and about to end
    auto stat = detail::read_text_file(t + "/stat");
    if (!stat) continue;
    size_t close = stat->rfind(')');
    char state = close != std::string::npos && close + 2 < stat->size() ? (*stat)[close + 2] : '?';
    if (state == 'Z' || state == 'X' || state == 'x') continue;
    auto sc = detail::read_text_file(t + "/syscall");
    int rank = 3;
    if (sc && sc->rfind("running", 0) == 0) {
      rank = 2;
    } else if (sc) {
      long nr = std::strtol(sc->c_str(), nullptr, 10);
      rank = detail::waits_for_the_outside(nr) ? 0 : detail::waits_with_timeout(nr) ? 1 : 3;
    }
    out.push_back({tid, rank});
  }
  ::closedir(dir);
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });
  return out;
}

enum class Stop {
  kNone,      // nothing new yet
  kSyscall,   // a syscall-entry or -exit stop
  kEvent,     // PTRACE_EVENT_STOP: our interrupt or a group-stop (sig)
  kSignal,    // signal-delivery-stop (sig)
  kExited,    // the thread is gone
};

struct StopEvent {
  Stop kind = Stop::kNone;
  int sig = 0;
};

}  // namespace

struct ThreadCall::State {
  // kReturned: stopped at the entry of the call's rt_sigreturn (followed
  // by syscall stops); kHome: past it, back in its own state, stopped by
  // the return marker (below).
  enum class Phase { kStopped, kRunning, kReturned, kHome, kReleased, kGone };

  pid_t pid = 0;
  pid_t tid = 0;
  bool we_are_parent = false;
  bool adopted = false;  // a StoppedProcess's thread: never detached here
  Phase phase = Phase::kReleased;
  uint64_t restore_rt = 0;
  std::optional<int64_t> errno_tpoff;

  detail::ThreadState thread;  // as it was at the stop
  std::optional<int32_t> saved_errno;
  uint64_t scratch_top = 0;
  uint64_t scratch_used = 0;
  uint64_t sigreturn_sp = 0;  // the call's frame, as its rt_sigreturn sees it
  uint64_t function_ = 0;
  uint64_t own_mask = 0;  // the thread's signal mask before the call
  // The return marker: a signal that tells the call's end without a stop
  // at every system call of it (0: follow the call by syscall stops).
  // Sent to the thread before the call, it stays pending, blocked by the
  // call's mask (every signal), and is delivered the moment rt_sigreturn
  // puts the thread's own mask back: a signal-delivery stop for us, where
  // it is dropped. Chosen among signals whose default is to be ignored
  // (SIGURG, SIGWINCH, SIGCHLD) that the program neither handles nor
  // blocks, so that if we are killed before we drop it, delivering it does
  // nothing. Following dlopen's ~50 system calls by syscall stops costs
  // ~100 round trips between the thread and us, each a wake-up that waits
  // for a CPU on a busy machine (ThreadCall's users: inject_library; an
  // adopted thread keeps the syscall stops, which its owner expects).
  int marker = 0;
  // kHome reached at the delivery of a signal of the program's (one that
  // came during the call, lower-numbered than the marker): delivered when
  // the thread is let go.
  int home_signal = 0;

  std::string p() const { return "process " + std::to_string(pid); }
  Error exited() {
    phase = Phase::kGone;
    return make_error(FTJIT_E_SYSTEM, p() + " exited during injection");
  }

  // One non-blocking look at the thread's wait status. An exit is peeked
  // at first: the exit of the main thread of a process whose parent we
  // are is left for the parent's own waitpid.
  StopEvent poll() {
    siginfo_t si;
    std::memset(&si, 0, sizeof si);
    if (::waitid(P_PID, static_cast<id_t>(tid), &si, WEXITED | WSTOPPED | __WALL | WNOHANG | WNOWAIT) != 0)
      return errno == EINTR ? StopEvent{} : StopEvent{Stop::kExited, 0};
    if (si.si_pid == 0) return {};
    if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
      if (tid != pid || !we_are_parent) {
        int st;
        ::waitpid(tid, &st, __WALL | WNOHANG);
      }
      return {Stop::kExited, 0};
    }
    int st = 0;
    pid_t w = ::waitpid(tid, &st, __WALL | WNOHANG);
    if (w <= 0) return {};
    if (WIFEXITED(st) || WIFSIGNALED(st)) return {Stop::kExited, 0};
    if (!WIFSTOPPED(st)) return {};
    int sig = WSTOPSIG(st);
    if (sig == kSyscallStop) return {Stop::kSyscall, sig};
    if ((st >> 16) == PTRACE_EVENT_STOP) return {Stop::kEvent, sig};
    return {Stop::kSignal, sig};
  }

  StopEvent wait(Clock::time_point deadline) {
    detail::StopWait stop_wait(1'000'000);
    for (int looks = 1;; ++looks) {
      StopEvent ev = poll();
      if (ev.kind != Stop::kNone) return ev;
      // A process that died while we wait (its threads zombies that no
      // wait reports) is seen through /proc, a directory and a stat file
      // per thread: not at every look, since following dlopen's system
      // calls waits some hundred times, nearly each one ended by the next
      // look (the first pauses are 10-40 us), and those reads were half
      // the CLI's work there.
      if (looks >= 4 && detail::process_gone(pid)) return {Stop::kExited, 0};
      if (Clock::now() > deadline) return {};
      stop_wait.pause();
    }
  }

  // ---------------------------------------------------------------------
  // Seizing
  // ---------------------------------------------------------------------

  // Seizes tid and waits for its interrupt stop. Signals that arrive on
  // the way are delivered as they would have been.
  Status stop_thread(Clock::time_point deadline) {
    if (::ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
      const int err = errno;
      // Listed a moment ago, gone now (a short-lived thread): seize() then
      // tries the next one.
      if (err == ESRCH) phase = Phase::kGone;
      return detail::seize_refused(pid, tid, err);
    }
    phase = Phase::kStopped;
    ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    for (;;) {
      StopEvent ev = wait(deadline);
      switch (ev.kind) {
        case Stop::kExited:
          phase = Phase::kGone;
          if (detail::process_gone(pid)) return exited();
          return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of " + p() + " exited");
        case Stop::kNone:
          return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of " + p() +
                                                " did not stop in time (uninterruptible sleep: vfork, disk or NFS I/O?); retry later");
        case Stop::kEvent:
          if (ev.sig != SIGTRAP)
            return make_error(FTJIT_E_INVALID_ARGUMENT, p() + " is stopped (" + strsignal(ev.sig) +
                                                            "): continue it (kill -CONT " + std::to_string(pid) + ") and retry");
          return {};
        case Stop::kSignal:
          ::ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(ev.sig)));
          ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
          break;
        case Stop::kSyscall:
          ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
          break;
      }
    }
  }

  Status save_state() {
    FTJIT_TRY(thread.save(pid, tid));
    if (::ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof own_mask), &own_mask) != 0) own_mask = ~uint64_t{0};
    if (errno_tpoff) {
      auto e = detail::read_target_memory(pid, thread.thread_pointer() + static_cast<uint64_t>(*errno_tpoff), 4);
      if (e) {
        int32_t v;
        std::memcpy(&v, e->data(), 4);
        saved_errno = v;
      }
    }
    scratch_top = (thread.sp() - detail::injector_isa().red_zone - kStackMargin) & ~uint64_t{15};
    return {};
  }

  // Why this thread must not run the loader now, or "" if it may: the
  // code it is in, or a frame of its call chain, holds a lock dlopen takes
  // (a signal handler on top of malloc, a dl_iterate_phdr callback); or
  // a call would not give it its whole state back.
  std::string unsafe_because(const detail::TargetLibc& libc) {
    if (const detail::AddressRange* r = libc.holder_of(thread.pc())) return "inside " + r->what;
    if (!thread.state_a_frame_loses().empty()) return thread.state_a_frame_loses();
    auto chain = detail::call_chain(tid, kMaxFrames);
    if (!chain) return chain.error().message;
    for (uint64_t ip : *chain)
      if (const detail::AddressRange* r = libc.holder_of(ip - 1)) return "called from " + r->what;
    // Cut short (a frame without CFI): what it is called from is unknown.
    const uint64_t last = chain->empty() ? 0 : chain->back();
    bool whole = false;
    for (const detail::AddressRange& r : libc.chain_ends) whole = whole || r.contains(last);
    if (!whole) return "on a stack that cannot be unwound past " + std::to_string(chain->size()) + " frames";
    return "";
  }

  // ---------------------------------------------------------------------
  // The call
  // ---------------------------------------------------------------------

  void put_errno_back() {
    if (!errno_tpoff || !saved_errno) return;
    int32_t v = *saved_errno;
    (void)detail::write_target_memory(pid, thread.thread_pointer() + static_cast<uint64_t>(*errno_tpoff),
                                      {reinterpret_cast<const uint8_t*>(&v), 4});
  }

  // Leaves a call that does not return in time to finish on its own: its
  // frame takes the thread home whenever it returns. (Putting the thread's
  // registers back instead would strand whatever the call holds, such as
  // the loader's lock, owned by a thread that is doing something else.)
  // The thread is brought to any stop first: ptrace detaches only stopped
  // threads. A syscall it was blocked in restarts as if we were never there.
  Status let_go(const std::string& why) {
    ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    auto deadline = Clock::now() + std::chrono::seconds(2);
    StopEvent ev = wait(deadline);
    if (ev.kind == Stop::kExited) return exited();
    if (ev.kind == Stop::kNone)
      return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of " + p() + " does not stop; " + why);
    int sig = ev.kind == Stop::kSignal ? ev.sig : 0;
    // Adopted: its owner detaches it; it must not sit in a syscall stop.
    if (adopted) ::ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(sig)));
    else ::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(sig)));
    phase = Phase::kReleased;
    return make_error(FTJIT_E_SYSTEM, why);
  }

  // The error of a Status that is one (every caller's is).
  static Error as_error(Status st) { return st.take_error(); }

  static bool is_fault(int sig, const siginfo_t& si) {
    return (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) && si.si_code > 0;
  }

  // A return marker for this call, or 0 (see `marker`).
  int choose_marker() const {
    auto status = detail::read_text_file("/proc/" + std::to_string(pid) + "/status");
    if (!status) return 0;
    auto caught = detail::status_field(*status, "SigCgt");
    if (!caught) return 0;
    const uint64_t handled = std::strtoull(caught->c_str(), nullptr, 16);
    for (int sig : {SIGURG, SIGWINCH, SIGCHLD}) {
      const uint64_t bit = uint64_t{1} << (sig - 1);
      if ((handled & bit) == 0 && (own_mask & bit) == 0) return sig;
    }
    return 0;
  }

  // Lets the call run on, delivering `sig`: to its next system call stop
  // when following those, else until a signal or its return marker.
  bool resume(int sig) {
    const auto request = marker != 0 ? PTRACE_CONT : PTRACE_SYSCALL;
    return ::ptrace(request, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(sig))) == 0;
  }

  // Whether the thread, stopped by its return marker, is back in its own
  // state: its own mask (the call's blocks every signal) and pc (or the
  // system call instruction before it, which the frame rewinds to for a
  // restart: 2 bytes on x86-64, 4 on arm64).
  bool is_home() {
    uint64_t mask = 0;
    if (::ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof mask), &mask) != 0) return false;
    auto now = detail::read_stopped_registers(tid);
    if (mask != own_mask || !now) return false;
    const uint64_t pc = thread.pc();
    return now->pc == pc || now->pc + 2 == pc || now->pc + 4 == pc;
  }

  Status run(uint64_t function, std::span<const uint64_t> args, std::chrono::milliseconds timeout) {
    FTJIT_TRY(start(function, args));
    auto r = follow(Clock::now() + timeout, timeout, true);
    FTJIT_TRY(r);
    return {};
  }

  Status start(uint64_t function, std::span<const uint64_t> args) {
    if (phase == Phase::kGone) return exited();
    if (phase != Phase::kStopped) return make_error(FTJIT_E_INVALID_ARGUMENT, "one call per stop of a thread");
    if (args.size() > 6) return make_error(FTJIT_E_INVALID_ARGUMENT, "at most 6 integer arguments can be passed");

    const uint64_t top = scratch_top - scratch_used;  // 16-byte aligned
    const detail::CallFrame frame = thread.frame_below(top, restore_rt);
    FTJIT_TRY(detail::write_target_memory(pid, frame.address, frame.bytes));
    sigreturn_sp = frame.sigreturn_sp;

    // Registers first, mask second: killed in between, the call runs with
    // the thread's own mask and its frame restores that same mask.
    if (int err = thread.enter_call(tid, frame, function, args, restore_rt); err != 0) {
      if (err == ESRCH) return exited();
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot set the registers of thread " + std::to_string(tid), err));
    }
    // Every signal waits until the frame's mask is back: no handler runs on
    // top of the loader (nor longjmps out of it).
    const uint64_t all = ~uint64_t{0};
    ::ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof all), &all);
    marker = adopted ? 0 : choose_marker();
    if (marker != 0 && ::syscall(SYS_tgkill, pid, tid, marker) != 0) marker = 0;
    if (!resume(0)) return exited();
    phase = Phase::kRunning;
    function_ = function;
    return {};
  }

  // Follows the running call until it returns (true), or until deadline
  // (false; with give_up, the call is then left to finish by itself and
  // that is the error).
  Result<bool> follow(Clock::time_point deadline, std::chrono::milliseconds timeout, bool give_up) {
    if (phase == Phase::kReturned || phase == Phase::kHome) return true;
    if (phase != Phase::kRunning) return make_error(FTJIT_E_INVALID_ARGUMENT, "no call is running");
    char fn[32];
    std::snprintf(fn, sizeof fn, "0x%" PRIx64, function_);
    for (;;) {
      StopEvent ev = wait(deadline);
      switch (ev.kind) {
        case Stop::kExited:
          return as_error(exited());
        case Stop::kNone:
          if (!give_up) return false;
          return as_error(let_go("the call to " + std::string(fn) + " in " + p() + " did not return within " +
                        std::to_string(timeout.count()) +
                        " ms (a lock held by the program?); it is left to finish by itself, "
                        "and its thread then goes back to what it was doing"));
        case Stop::kEvent:  // a group-stop: our call finishes first
          resume(0);
          break;
        case Stop::kSyscall: {
          // Our rt_sigreturn: entered from the trampoline (pc is past its
          // system call instruction, its last) with sp at our frame.
          __ptrace_syscall_info info{};
          if (::ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info) > 0 &&
              info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_rt_sigreturn &&
              info.instruction_pointer == restore_rt + detail::restore_rt_code().size() &&
              info.stack_pointer == sigreturn_sp) {
            phase = Phase::kReturned;
            return true;
          }
          resume(0);
          break;
        }
        case Stop::kSignal: {
          siginfo_t si;
          std::memset(&si, 0, sizeof si);
          ::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
          // (Not told from one the program sent itself by si_pid, which a
          // target in another PID namespace sees as 0: the two would be
          // one pending signal anyway, which the program ignores.)
          const bool ours = marker != 0 && ev.sig == marker;
          // While the call runs every signal is blocked: one delivered
          // with the thread's own mask back and at its own pc came after
          // rt_sigreturn. The marker, or a signal of the program's that
          // arrived during the call and goes first (a lower number):
          // that one is delivered when the thread is let go.
          if (marker != 0 && !is_fault(ev.sig, si) && is_home()) {
            phase = Phase::kHome;
            home_signal = ours ? 0 : ev.sig;
            return true;
          }
          if (ours) {
            // Delivered inside the call (it unblocked the signal), it
            // tells nothing: the call is followed by syscall stops from
            // here on, and the marker is dropped.
            marker = 0;
            resume(0);
            break;
          }
          if (!is_fault(ev.sig, si)) {
            // Not blocked by the call's mask (the function unblocked it):
            // delivered as the program would get it.
            resume(ev.sig);
            break;
          }
          auto now = detail::read_stopped_registers(tid);
          char where[64];
          std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(now ? now->pc : 0));
          // In the signal-delivery stop: put back, detach with no signal.
          thread.restore_in_place(tid);
          put_errno_back();
          if (!adopted) ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
          phase = Phase::kReleased;
          return make_error(FTJIT_E_SYSTEM, "the call to " + std::string(fn) + " in " + p() + " crashed with " +
                                                strsignal(ev.sig) + " at " + where +
                                                "; the thread was put back where it was, the process keeps running");
        }
      }
    }
  }

  Status release() {
    switch (phase) {
      case Phase::kReleased:
      case Phase::kGone:
        return {};
      case Phase::kRunning:
        return let_go("the call was left to finish by itself");
      case Phase::kReturned:
        // At the entry of its rt_sigreturn: let that run to its exit stop,
        // so that the thread is back (registers, mask) when we return; a
        // kill meanwhile changes nothing, the kernel lets it finish.
        put_errno_back();
        if (::ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr) == 0) {
          for (auto deadline = Clock::now() + std::chrono::seconds(2);;) {
            StopEvent ev = wait(deadline);
            if (ev.kind == Stop::kExited) return exited();
            if (ev.kind == Stop::kNone || ev.kind == Stop::kSyscall) break;
            // A signal or group-stop on the way out: delivered as usual.
            ::ptrace(PTRACE_SYSCALL, tid, nullptr,
                     reinterpret_cast<void*>(static_cast<uintptr_t>(ev.kind == Stop::kSignal ? ev.sig : 0)));
          }
        }
        [[fallthrough]];
      case Phase::kHome:
        // The marker, if it made this stop, is dropped by the detach below;
        // if a signal of the program's did, the marker comes after it,
        // untraced: ignored.
        if (phase == Phase::kHome) put_errno_back();
        [[fallthrough]];
      case Phase::kStopped:
        phase = Phase::kReleased;
        if (adopted) return {};  // stays stopped: its owner lets it go
        if (::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(home_signal))) != 0 &&
            errno == ESRCH && detail::process_gone(pid))
          return exited();
        return {};
    }
    return {};
  }
};

ThreadCall::ThreadCall(std::unique_ptr<State> s) : s_(std::move(s)) {}
ThreadCall::ThreadCall(ThreadCall&&) noexcept = default;
ThreadCall& ThreadCall::operator=(ThreadCall&& other) noexcept {
  if (this != &other) {
    if (s_) (void)s_->release();
    s_ = std::move(other.s_);
  }
  return *this;
}
ThreadCall::~ThreadCall() {
  if (s_) (void)s_->release();
}

pid_t ThreadCall::tid() const { return s_->tid; }
uint64_t ThreadCall::thread_pointer() const { return s_->thread.thread_pointer(); }

Result<ThreadCall> ThreadCall::seize(pid_t pid, const detail::TargetLibc& libc, pid_t tid,
                                     std::chrono::milliseconds timeout) {
  if (pid <= 0) return make_error(FTJIT_E_INVALID_ARGUMENT, "invalid process id " + std::to_string(pid));
  auto status = detail::read_text_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
  if (auto tracer = detail::status_field(*status, "TracerPid"); tracer && *tracer != "0")
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "process " + std::to_string(pid) + " is already traced by PID " + *tracer + " (a debugger?)");
  bool we_are_parent = false;
  if (auto ppid = detail::status_field(*status, "PPid"))
    we_are_parent = std::strtol(ppid->c_str(), nullptr, 10) == ::getpid();

  const auto deadline = Clock::now() + timeout;
  std::string last_reason;
  for (;;) {
    std::vector<Candidate> candidates;
    if (tid != 0) candidates.push_back({tid, 0});
    else candidates = rank_threads(pid);
    if (candidates.empty()) {
      if (detail::process_gone(pid)) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
    }
    for (const Candidate& c : candidates) {
      auto s = std::make_unique<State>();
      s->pid = pid;
      s->tid = c.tid;
      s->we_are_parent = we_are_parent;
      s->restore_rt = libc.restore_rt;
      s->errno_tpoff = libc.errno_tpoff;
      // A stop takes what it takes, whatever is left of the search's time.
      Status stopped = s->stop_thread(std::max(deadline, Clock::now() + std::chrono::seconds(2)));
      if (!stopped) {
        (void)s->release();
        // A thread that exited meanwhile is no reason to give up.
        if (s->phase == State::Phase::kGone && !detail::process_gone(pid) && tid == 0) continue;
        return stopped.take_error();
      }
      if (Status saved = s->save_state(); !saved) {
        (void)s->release();
        return saved.take_error();
      }
      std::string why = s->unsafe_because(libc);
      if (why.empty()) return ThreadCall(std::move(s));
      last_reason = "thread " + std::to_string(c.tid) + " is " + why;
      (void)s->release();  // untouched: it goes on as if never stopped
    }
    if (Clock::now() > deadline) {
      return make_error(FTJIT_E_SYSTEM, "no thread of process " + std::to_string(pid) +
                                            " stood where it could safely load a library (" + last_reason +
                                            "); retry when it is less busy");
    }
    timespec ts{0, 2'000'000};
    ::nanosleep(&ts, nullptr);
  }
}

Result<ThreadCall> ThreadCall::adopt(pid_t pid, const detail::TargetLibc& libc, pid_t tid) {
  auto s = std::make_unique<State>();
  s->pid = pid;
  s->tid = tid;
  s->adopted = true;
  s->restore_rt = libc.restore_rt;
  s->errno_tpoff = libc.errno_tpoff;
  if (::ptrace(PTRACE_SETOPTIONS, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_SETOPTIONS of thread " + std::to_string(tid), errno));
  s->phase = State::Phase::kStopped;
  FTJIT_TRY(s->save_state());
  // The caller has made its own safety check, but cannot know this one:
  // the call would silently cost the thread part of its state.
  if (!s->thread.state_a_frame_loses().empty())
    return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of process " + std::to_string(pid) +
                                          " is " + s->thread.state_a_frame_loses() + "; retry");
  return ThreadCall(std::move(s));
}

Status ThreadCall::start(uint64_t function, std::span<const uint64_t> args) { return s_->start(function, args); }

Result<bool> ThreadCall::returned_within(std::chrono::milliseconds patience) {
  return s_->follow(Clock::now() + patience, patience, false);
}

Status ThreadCall::finish(std::chrono::milliseconds timeout) {
  FTJIT_TRY(s_->follow(Clock::now() + timeout, timeout, true));
  return {};
}

Result<uint64_t> ThreadCall::push_string(std::string_view str) {
  const uint64_t rounded = (str.size() + 1 + 15) & ~uint64_t{15};
  if (s_->scratch_used + rounded > kScratchLimit)
    return make_error(FTJIT_E_OUT_OF_RANGE, "more than 16 KiB pushed on the stack of " + s_->p());
  const uint64_t addr = s_->scratch_top - s_->scratch_used - rounded;
  std::vector<uint8_t> bytes(str.begin(), str.end());
  bytes.push_back(0);
  FTJIT_TRY(detail::write_target_memory(s_->pid, addr, bytes));
  s_->scratch_used += rounded;
  return addr;
}

Status ThreadCall::run(uint64_t function, std::span<const uint64_t> args, std::chrono::milliseconds timeout) {
  return s_->run(function, args, timeout);
}

Status ThreadCall::release() { return s_ ? s_->release() : Status{}; }

}  // namespace ftjit::inject
