// SPDX-License-Identifier: MIT
// StoppedProcess: stop every thread of a target with ptrace, run calls on
// one of them, put everything back exactly as it was.
//
//   hijacked thread's stack during a call
//
//   original rsp ->  +-----------------------------+
//                    | red zone (128 B), untouched |
//                    | 512 B margin                |
//   scratch_top  ->  +-----------------------------+
//                    | push_bytes() data, growing  |
//                    | down, 16-byte granules      |
//                    +-----------------------------+
//                    | alignment                   |  (16-byte aligned)
//   call rsp     ->  | fake return address 0       |  rsp % 16 == 8 at entry
//                    +-----------------------------+
//                    | the function's own frames   |
//
// The function returns to address 0 and faults: a SIGSEGV signal-delivery
// stop with rip == 0 is "call returned", rax its value. That SIGSEGV is
// never delivered (every resume and detach passes signal 0).
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "cli/inject/inject_internal.h"
#include "cli/inject/ptrace_inject.h"

namespace ftjit::inject {

using detail::errno_message;
using Clock = std::chrono::steady_clock;

namespace {

// How long a call may run with the other threads stopped before they are
// let run (one of them may hold a lock the call waits for).
constexpr auto kReleaseOthersAfter = std::chrono::milliseconds(1000);
// Grace period to stop the hijacked thread after a call timed out, and to
// collect the exit of threads of a process that died.
constexpr auto kGrace = std::chrono::milliseconds(2000);
constexpr uint64_t kRedZone = 128;
constexpr uint64_t kStackMargin = 512;
constexpr uint64_t kScratchLimit = 64 * 1024;
constexpr size_t kXstateBufferSize = 64 * 1024;  // > any XSAVE area (AMX: ~11 KiB)
constexpr unsigned long long kEflagsTrap = 0x100;       // TF
constexpr unsigned long long kEflagsDirection = 0x400;  // DF: the ABI wants it clear

// Polls without blocking, sleeping a little longer each time (20 us .. 2 ms).
class Backoff {
 public:
  void sleep() {
    timespec ts{0, static_cast<long>(ns_)};
    ::nanosleep(&ts, nullptr);
    ns_ = std::min<long long>(ns_ * 2, 2'000'000);
  }

 private:
  long long ns_ = 20'000;
};

enum class EventKind {
  kNone,       // nothing new
  kStopEvent,  // PTRACE_EVENT_STOP: our interrupt, or a group-stop
  kSignal,     // signal-delivery-stop; sig is the signal
  kExited,     // the thread is gone (exit or killed)
};

struct Event {
  EventKind kind = EventKind::kNone;
  int sig = 0;
};

}  // namespace

struct StoppedProcess::State {
  enum class Run { kRunning, kStopped, kGone };
  struct Thread {
    pid_t tid;
    Run run;
  };
  struct DeferredSignal {
    int sig;
    siginfo_t info;
  };

  pid_t pid = 0;
  bool we_are_parent = false;
  std::vector<Thread> threads;
  pid_t hijacked = 0;
  bool regs_saved = false;
  user_regs_struct saved_regs{};
  std::vector<uint8_t> xstate;  // NT_X86_XSTATE as read, or empty
  bool fpregs_saved = false;
  user_fpregs_struct saved_fpregs{};
  uint64_t scratch_top = 0;
  uint64_t scratch_used = 0;
  std::vector<DeferredSignal> deferred;
  int mem_fd = -1;
  bool dead = false;
  bool detached = false;
  sigset_t old_mask{};

  ~State() {
    if (mem_fd >= 0) ::close(mem_fd);
  }

  std::string p() const { return "process " + std::to_string(pid); }
  Error exited() {
    dead = true;
    return make_error(FTJIT_E_SYSTEM, p() + " exited during injection");
  }
  Thread* find(pid_t tid) {
    for (Thread& t : threads)
      if (t.tid == tid) return &t;
    return nullptr;
  }

  // ---------------------------------------------------------------------
  // Waiting
  // ---------------------------------------------------------------------

  // One non-blocking look at a thread's wait status. Exits are peeked at
  // with WNOWAIT first: the exit of the main thread of a process whose
  // parent we are is left for the parent's own waitpid.
  Event poll(pid_t tid) {
    siginfo_t si;
    std::memset(&si, 0, sizeof si);
    if (::waitid(P_PID, static_cast<id_t>(tid), &si, WEXITED | WSTOPPED | __WALL | WNOHANG | WNOWAIT) != 0)
      return errno == EINTR ? Event{} : Event{EventKind::kExited, 0};  // ECHILD: no longer ours
    if (si.si_pid == 0) return {};
    if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
      if (tid != pid || !we_are_parent) {
        int st;
        ::waitpid(tid, &st, __WALL | WNOHANG);
      }
      if (Thread* t = find(tid)) t->run = Run::kGone;
      return {EventKind::kExited, 0};
    }
    int st = 0;
    pid_t w = ::waitpid(tid, &st, __WALL | WNOHANG);
    if (w <= 0) return {};
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      if (Thread* t = find(tid)) t->run = Run::kGone;
      return {EventKind::kExited, 0};
    }
    if (!WIFSTOPPED(st)) return {};
    int sig = WSTOPSIG(st);
    int event = st >> 16;
    if (event == PTRACE_EVENT_STOP) return {EventKind::kStopEvent, sig};
    if (event != 0) return {EventKind::kStopEvent, sig};  // no options set: not expected
    return {EventKind::kSignal, sig};
  }

  // Waits until every thread marked running has stopped (delivering the
  // signals that show up on the way). kGone threads are dropped; the death
  // of the process is an error.
  Status wait_all_stopped(Clock::time_point deadline) {
    Backoff backoff;
    for (;;) {
      bool all = true;
      for (Thread& t : threads) {
        if (t.run != Run::kRunning) continue;
        Event ev = poll(t.tid);
        switch (ev.kind) {
          case EventKind::kNone: all = false; break;
          case EventKind::kStopEvent: t.run = Run::kStopped; break;
          case EventKind::kSignal:
            // It would have been delivered now anyway; the pending
            // interrupt stops the thread before its handler runs.
            ::ptrace(PTRACE_CONT, t.tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(ev.sig)));
            ::ptrace(PTRACE_INTERRUPT, t.tid, nullptr, nullptr);
            all = false;
            break;
          case EventKind::kExited:
            t.run = Run::kGone;
            if (t.tid == pid || detail::process_gone(pid)) return exited();
            break;
        }
      }
      std::erase_if(threads, [&](const Thread& t) { return t.run == Run::kGone && t.tid != hijacked; });
      if (all) return {};
      if (Clock::now() > deadline) {
        std::string tids;
        for (const Thread& t : threads)
          if (t.run == Run::kRunning) tids += (tids.empty() ? "" : ",") + std::to_string(t.tid);
        return make_error(FTJIT_E_SYSTEM, "thread(s) " + tids + " of " + p() +
                                              " did not stop in time (uninterruptible sleep: vfork, disk or NFS I/O?); retry later");
      }
      backoff.sleep();
    }
  }

  // Seizes every thread listed in /proc/PID/task, again and again until a
  // scan finds no new one while all known threads are stopped: a stopped
  // thread cannot create threads, so the set is then complete.
  Status seize_all(Clock::time_point deadline) {
    const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
    std::vector<pid_t> zombies;
    for (;;) {
      if (Clock::now() > deadline) return make_error(FTJIT_E_SYSTEM, "the threads of " + p() + " kept changing; retry");
      DIR* dir = ::opendir(task_dir.c_str());
      if (!dir) {
        if (threads.empty()) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
        return exited();
      }
      std::vector<pid_t> fresh;
      while (dirent* de = ::readdir(dir)) {
        pid_t tid = static_cast<pid_t>(std::strtol(de->d_name, nullptr, 10));
        if (tid > 0 && !find(tid) && std::find(zombies.begin(), zombies.end(), tid) == zombies.end())
          fresh.push_back(tid);
      }
      ::closedir(dir);
      if (fresh.empty()) return {};
      for (pid_t tid : fresh) {
        // A zombie thread (e.g. a main thread that called pthread_exit)
        // never reaches a ptrace stop: leave it alone.
        auto st = detail::read_text_file(task_dir + "/" + std::to_string(tid) + "/stat");
        if (st) {
          size_t close = st->rfind(')');
          if (close != std::string::npos && close + 2 < st->size() && ((*st)[close + 2] == 'Z' || (*st)[close + 2] == 'X')) {
            zombies.push_back(tid);
            continue;
          }
        }
        if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
          int err = errno;
          if (err == ESRCH) continue;  // exited meanwhile
          if (err == EPERM) {
            pid_t tracer = detail::tracer_of(pid);
            if (tracer != 0 && tracer != ::getpid())
              return make_error(FTJIT_E_INVALID_ARGUMENT, p() + " is already traced by PID " + std::to_string(tracer) + " (a debugger?)");
            auto scope = detail::read_text_file("/proc/sys/kernel/yama/ptrace_scope");
            if (scope && std::atoi(scope->c_str()) == 1)
              return make_error(FTJIT_E_UNSUPPORTED,
                                "ptrace is not permitted: /proc/sys/kernel/yama/ptrace_scope is 1 (only descendants may be traced); "
                                "run as root or with CAP_SYS_PTRACE, or set it to 0 (sysctl kernel.yama.ptrace_scope=0)");
            return make_error(FTJIT_E_UNSUPPORTED, "ptrace of " + p() +
                                                       " is not permitted (a setuid program, another user, or a security module): "
                                                       "run ftjit as root or with CAP_SYS_PTRACE");
          }
          return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_SEIZE of thread " + std::to_string(tid), err));
        }
        threads.push_back({tid, Run::kRunning});
        ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
      }
      FTJIT_TRY(wait_all_stopped(deadline));
    }
  }

  // ---------------------------------------------------------------------
  // Memory
  // ---------------------------------------------------------------------

  Status write_memory(uint64_t addr, std::span<const uint8_t> bytes) {
    if (mem_fd < 0) mem_fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem_fd >= 0 && ::pwrite(mem_fd, bytes.data(), bytes.size(), static_cast<off_t>(addr)) ==
                           static_cast<ssize_t>(bytes.size()))
      return {};
    // Fallback: word by word with PTRACE_POKEDATA (read-modify-write at the ends).
    for (size_t done = 0; done < bytes.size();) {
      uint64_t word_addr = (addr + done) & ~uint64_t{7};
      size_t in_word = (addr + done) - word_addr;
      errno = 0;
      long word = ::ptrace(PTRACE_PEEKDATA, hijacked, reinterpret_cast<void*>(word_addr), nullptr);
      if (errno != 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot write the memory of " + p(), errno));
      size_t n = std::min(sizeof(long) - in_word, bytes.size() - done);
      std::memcpy(reinterpret_cast<uint8_t*>(&word) + in_word, bytes.data() + done, n);
      if (::ptrace(PTRACE_POKEDATA, hijacked, reinterpret_cast<void*>(word_addr), reinterpret_cast<void*>(word)) != 0)
        return make_error(FTJIT_E_SYSTEM, errno_message("cannot write the memory of " + p(), errno));
      done += n;
    }
    return {};
  }

  Result<std::vector<uint8_t>> read_memory(uint64_t addr, size_t size) {
    std::vector<uint8_t> out(size);
    if (mem_fd < 0) mem_fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem_fd >= 0) {
      ssize_t n = ::pread(mem_fd, out.data(), size, static_cast<off_t>(addr));
      if (n == static_cast<ssize_t>(size)) return out;
    }
    for (size_t done = 0; done < size;) {
      uint64_t word_addr = (addr + done) & ~uint64_t{7};
      size_t in_word = (addr + done) - word_addr;
      errno = 0;
      long word = ::ptrace(PTRACE_PEEKDATA, hijacked, reinterpret_cast<void*>(word_addr), nullptr);
      if (errno != 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the memory of " + p(), errno));
      size_t n = std::min(sizeof(long) - in_word, size - done);
      std::memcpy(out.data() + done, reinterpret_cast<uint8_t*>(&word) + in_word, n);
      done += n;
    }
    return out;
  }

  // ---------------------------------------------------------------------
  // Registers
  // ---------------------------------------------------------------------

  Status save_registers() {
    if (::ptrace(PTRACE_GETREGS, hijacked, nullptr, &saved_regs) != 0) {
      if (errno == ESRCH) return exited();
      return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGS of thread " + std::to_string(hijacked), errno));
    }
    regs_saved = true;
    xstate.assign(kXstateBufferSize, 0);
    iovec iov{xstate.data(), xstate.size()};
    if (::ptrace(PTRACE_GETREGSET, hijacked, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0) {
      xstate.resize(iov.iov_len);
    } else {
      xstate.clear();
      if (::ptrace(PTRACE_GETFPREGS, hijacked, nullptr, &saved_fpregs) != 0)
        return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the FP registers of thread " + std::to_string(hijacked), errno));
      fpregs_saved = true;
    }
    scratch_top = (saved_regs.rsp - kRedZone - kStackMargin) & ~uint64_t{15};
    return {};
  }

  // Puts the hijacked thread's registers back as they were at the stop.
  Status restore_registers() {
    if (!regs_saved) return {};
    if (::ptrace(PTRACE_SETREGS, hijacked, nullptr, &saved_regs) != 0)
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot restore the registers of thread " + std::to_string(hijacked), errno));
    if (!xstate.empty()) {
      iovec iov{xstate.data(), xstate.size()};
      if (::ptrace(PTRACE_SETREGSET, hijacked, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0)
        return make_error(FTJIT_E_SYSTEM, errno_message("cannot restore the vector registers of thread " + std::to_string(hijacked), errno));
    } else if (fpregs_saved) {
      if (::ptrace(PTRACE_SETFPREGS, hijacked, nullptr, &saved_fpregs) != 0)
        return make_error(FTJIT_E_SYSTEM, errno_message("cannot restore the FP registers of thread " + std::to_string(hijacked), errno));
    }
    return {};
  }

  // ---------------------------------------------------------------------
  // Other threads during a long call
  // ---------------------------------------------------------------------

  void release_others() {
    for (Thread& t : threads)
      if (t.tid != hijacked && t.run == Run::kStopped && ::ptrace(PTRACE_CONT, t.tid, nullptr, nullptr) == 0)
        t.run = Run::kRunning;
  }

  // Lets the released threads go on as if untraced: their signals are
  // delivered, a group-stop is left in place. Also collects the exits of
  // stopped threads killed with the whole process (until their tracer
  // reaps them, the main thread's own exit is never reported).
  void serve_others() {
    for (Thread& t : threads) {
      if (t.tid == hijacked || t.run == Run::kGone) continue;
      Event ev = poll(t.tid);
      if (ev.kind == EventKind::kSignal)
        ::ptrace(PTRACE_CONT, t.tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(ev.sig)));
      else if (ev.kind == EventKind::kStopEvent)
        t.run = Run::kStopped;
    }
  }

  Status stop_others(Clock::time_point deadline) {
    for (Thread& t : threads)
      if (t.tid != hijacked && t.run == Run::kRunning) ::ptrace(PTRACE_INTERRUPT, t.tid, nullptr, nullptr);
    return wait_all_stopped(deadline);
  }

  // A fault raised by the kernel (not sent by someone) inside our call.
  static bool is_fault(int sig, const siginfo_t& si) {
    return (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) && si.si_code > 0;
  }

  void defer_signal(int sig) {
    siginfo_t si;
    std::memset(&si, 0, sizeof si);
    ::ptrace(PTRACE_GETSIGINFO, hijacked, nullptr, &si);
    // A signal the thread sent itself comes from the code we called (e.g.
    // abort()): that is our business, not the program's.
    bool self_sent = (si.si_code == SI_TKILL || si.si_code == SI_USER) && si.si_pid == pid;
    if (!self_sent) deferred.push_back({sig, si});
  }

  // Stops the hijacked thread after an abandoned call.
  Status recall_hijacked(Clock::time_point deadline) {
    ::ptrace(PTRACE_INTERRUPT, hijacked, nullptr, nullptr);
    Backoff backoff;
    for (;;) {
      Event ev = poll(hijacked);
      if (ev.kind == EventKind::kExited) return exited();
      if (ev.kind == EventKind::kStopEvent) return {};
      if (ev.kind == EventKind::kSignal) {
        // Stopped: keep it so (the signal is re-sent after detach).
        defer_signal(ev.sig);
        return {};
      }
      serve_others();
      if (detail::process_gone(pid)) return exited();
      if (Clock::now() > deadline)
        return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(hijacked) + " of " + p() + " does not stop");
      backoff.sleep();
    }
  }

  Result<uint64_t> call(uint64_t function, std::span<const uint64_t> args, std::chrono::milliseconds timeout) {
    if (dead) return exited();
    if (detached) return make_error(FTJIT_E_INVALID_ARGUMENT, p() + " is no longer stopped");
    if (args.size() > 6) return make_error(FTJIT_E_INVALID_ARGUMENT, "at most 6 integer arguments can be passed");
    const auto start = Clock::now();
    const auto deadline = start + timeout;

    user_regs_struct regs = saved_regs;
    uint64_t sp = (scratch_top - scratch_used) & ~uint64_t{15};
    sp -= 8;  // the fake return address: rsp % 16 == 8 at entry
    const uint8_t zero[8] = {};
    FTJIT_TRY(write_memory(sp, zero));
    regs.rsp = sp;
    regs.rip = function;
    regs.rax = 0;  // no vector registers for a variadic callee
    // Not a syscall any more: no restart logic when the thread resumes.
    regs.orig_rax = static_cast<unsigned long long>(-1);
    unsigned long long* arg_regs[6] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
    for (size_t i = 0; i < args.size(); ++i) *arg_regs[i] = args[i];
    regs.eflags &= ~(kEflagsTrap | kEflagsDirection);
    if (::ptrace(PTRACE_SETREGS, hijacked, nullptr, &regs) != 0) {
      if (errno == ESRCH) return exited();
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot set the registers of thread " + std::to_string(hijacked), errno));
    }
    if (::ptrace(PTRACE_CONT, hijacked, nullptr, nullptr) != 0) return exited();

    char fn[32];
    std::snprintf(fn, sizeof fn, "0x%" PRIx64, function);
    bool released = false;
    Backoff backoff;
    for (;;) {
      Event ev = poll(hijacked);
      if (ev.kind == EventKind::kExited) return exited();
      if (ev.kind == EventKind::kStopEvent) {
        // A group-stop (SIGSTOP to the process) while we run: finish our
        // call; the process stops again when we detach.
        ::ptrace(PTRACE_CONT, hijacked, nullptr, nullptr);
      } else if (ev.kind == EventKind::kSignal) {
        user_regs_struct now{};
        if (::ptrace(PTRACE_GETREGS, hijacked, nullptr, &now) != 0) return exited();
        siginfo_t si;
        std::memset(&si, 0, sizeof si);
        ::ptrace(PTRACE_GETSIGINFO, hijacked, nullptr, &si);
        if (ev.sig == SIGSEGV && now.rip == 0) {
          if (released) FTJIT_TRY(stop_others(Clock::now() + kGrace));
          return static_cast<uint64_t>(now.rax);
        }
        if (is_fault(ev.sig, si)) {
          // The thread stays stopped here; detach puts its registers back.
          // Locks the call took stay taken.
          if (released) (void)stop_others(Clock::now() + kGrace);
          char where[64];
          std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(now.rip));
          return make_error(FTJIT_E_SYSTEM, "the call to " + std::string(fn) + " in " + p() + " crashed with " +
                                                strsignal(ev.sig) + " at " + where +
                                                "; the thread was put back where it was, the process keeps running");
        }
        // Someone else's signal (SIGCHLD, SIGALRM, ...): never let it run a
        // handler on top of our call; re-sent after detach.
        defer_signal(ev.sig);
        ::ptrace(PTRACE_CONT, hijacked, nullptr, nullptr);
      }
      serve_others();
      auto now = Clock::now();
      if (!released && now - start > kReleaseOthersAfter) {
        release_others();
        released = true;
      }
      if (now > deadline) {
        // Abandon the call: stop the thread and (at detach) put its
        // registers back. If it was only waiting for a lock it holds
        // nothing and the process goes on as before. If it was inside the
        // loader's or malloc's locked region, those locks stay taken and a
        // later dlopen/malloc in the process may hang; that is still safer
        // than letting it run on and crash on the return to address 0.
        Status recalled = recall_hijacked(Clock::now() + kGrace);
        if (released) (void)stop_others(Clock::now() + kGrace);
        FTJIT_TRY(recalled);
        return make_error(FTJIT_E_SYSTEM,
                          "the call to " + std::string(fn) + " in " + p() + " did not return within " +
                              std::to_string(timeout.count()) +
                              " ms (a lock held by the program?); it was abandoned and the thread put back, "
                              "but the process may hang if it held a lock: restart it if it does");
      }
      if (ev.kind == EventKind::kNone) backoff.sleep();
    }
  }

  // ---------------------------------------------------------------------
  // Detach
  // ---------------------------------------------------------------------

  // Collects the exits of the threads of a dead process (traced zombies
  // stay until their tracer waits, and hold up the parent's waitpid).
  void reap_dead() {
    auto deadline = Clock::now() + kGrace;
    Backoff backoff;
    for (;;) {
      bool all = true;
      for (Thread& t : threads) {
        if (t.run == Run::kGone) continue;
        if (poll(t.tid).kind != EventKind::kExited) all = false;
      }
      if (all || Clock::now() > deadline) return;
      backoff.sleep();
    }
  }

  Status detach() {
    if (detached) return {};
    detached = true;
    Status result;
    if (dead) {
      reap_dead();
      result = exited();
    } else {
      // Threads still running (a stop timed out) cannot be detached; they
      // are untraced when this process exits.
      Status restored = restore_registers();
      bool some_failed = false;
      for (Thread& t : threads) {
        if (t.run == Run::kGone) continue;
        if (::ptrace(PTRACE_DETACH, t.tid, nullptr, nullptr) == 0 || errno != ESRCH) {
          t.run = Run::kGone;  // no longer ours
          continue;
        }
        some_failed = true;
      }
      // A thread that refused to detach is dying (the process exits just
      // now, e.g. a thread detached first called exit), or still running
      // after a stop that timed out. The dying ones must be collected:
      // a traced zombie holds up its parent's waitpid.
      if (some_failed) {
        reap_dead();
        if (detail::process_gone(pid)) result = exited();
      }
      if (result.ok()) {
        for (const DeferredSignal& d : deferred) ::syscall(SYS_tgkill, pid, hijacked, d.sig);
        if (!restored.ok()) result = std::move(restored);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return result;
  }
};

// ---------------------------------------------------------------------------
// StoppedProcess
// ---------------------------------------------------------------------------

StoppedProcess::StoppedProcess(std::unique_ptr<State> state) : s_(std::move(state)) {}
StoppedProcess::StoppedProcess(StoppedProcess&&) noexcept = default;
StoppedProcess& StoppedProcess::operator=(StoppedProcess&& other) noexcept {
  if (this != &other) {
    if (s_) (void)s_->detach();
    s_ = std::move(other.s_);
  }
  return *this;
}
StoppedProcess::~StoppedProcess() {
  if (s_) (void)s_->detach();
}

pid_t StoppedProcess::pid() const { return s_->pid; }
pid_t StoppedProcess::hijacked_tid() const { return s_->hijacked; }
size_t StoppedProcess::thread_count() const { return s_->threads.size(); }

Result<StoppedProcess> StoppedProcess::stop(pid_t pid, std::chrono::milliseconds timeout) {
  if (pid <= 0) return make_error(FTJIT_E_INVALID_ARGUMENT, "invalid process id " + std::to_string(pid));
  auto state = std::make_unique<State>();
  state->pid = pid;
  auto status = detail::read_text_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
  if (auto tracer = detail::status_field(*status, "TracerPid"); tracer && *tracer != "0")
    return make_error(FTJIT_E_INVALID_ARGUMENT, state->p() + " is already traced by PID " + *tracer + " (a debugger?)");
  if (auto ppid = detail::status_field(*status, "PPid"))
    state->we_are_parent = std::strtol(ppid->c_str(), nullptr, 10) == ::getpid();

  // From here until detach, Ctrl-C and friends wait: they must not kill
  // us while the target runs our code.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &block, &state->old_mask);
  StoppedProcess stopped(std::move(state));  // detaches on every error below
  State& s = *stopped.s_;

  FTJIT_TRY(s.seize_all(Clock::now() + timeout));
  if (s.dead) return s.exited();
  for (const State::Thread& t : s.threads)
    if (t.run == State::Run::kStopped && (s.hijacked == 0 || t.tid == pid)) s.hijacked = t.tid;
  if (s.hijacked == 0) return s.exited();
  FTJIT_TRY(s.save_registers());
  return stopped;
}

Result<uint64_t> StoppedProcess::push_bytes(std::span<const uint8_t> bytes) {
  uint64_t rounded = (bytes.size() + 15) & ~uint64_t{15};
  if (s_->scratch_used + rounded > kScratchLimit)
    return make_error(FTJIT_E_OUT_OF_RANGE, "more than 64 KiB pushed on the stack of " + s_->p());
  uint64_t addr = s_->scratch_top - s_->scratch_used - rounded;
  FTJIT_TRY(s_->write_memory(addr, bytes));
  s_->scratch_used += rounded;
  return addr;
}

Result<uint64_t> StoppedProcess::push_string(std::string_view str) {
  std::vector<uint8_t> bytes(str.begin(), str.end());
  bytes.push_back(0);
  return push_bytes(bytes);
}

Result<uint64_t> StoppedProcess::call(uint64_t function, std::span<const uint64_t> args,
                                      std::chrono::milliseconds timeout) {
  return s_->call(function, args, timeout);
}

Result<std::vector<uint8_t>> StoppedProcess::read_memory(uint64_t address, size_t size) {
  return s_->read_memory(address, size);
}

Result<std::string> StoppedProcess::read_string(uint64_t address, size_t max_len) {
  std::string out;
  while (out.size() < max_len) {
    // Never cross a page in one read: the next page may be unmapped.
    size_t chunk = std::min<size_t>(4096 - ((address + out.size()) & 4095), max_len - out.size());
    auto bytes = s_->read_memory(address + out.size(), chunk);
    FTJIT_TRY(bytes);
    for (uint8_t b : *bytes) {
      if (b == 0) return out;
      out.push_back(static_cast<char>(b));
    }
  }
  return out;
}

Status StoppedProcess::detach() { return s_ ? s_->detach() : Status{}; }

Result<uint64_t> call_in_target(pid_t pid, uint64_t function, std::span<const uint64_t> args,
                                std::chrono::milliseconds timeout) {
  auto stopped = StoppedProcess::stop(pid, timeout);
  FTJIT_TRY(stopped);
  auto result = stopped->call(function, args, timeout);
  Status detached = stopped->detach();
  if (!result.ok()) return result;
  FTJIT_TRY(detached);
  return result;
}

}  // namespace ftjit::inject
