// SPDX-License-Identifier: MIT
// StoppedProcess: every thread of a target in a ptrace stop, for a
// consistent look at all of them (their registers, their stacks), then let
// go exactly as they were. Nothing is run in the target and no register is
// written: a killed injector leaves every thread running (the kernel
// detaches them), each one restarting the system call it was in.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <optional>

#include "cli/inject/injector_isa.h"
#include "cli/inject/inject_internal.h"
#include "cli/inject/ptrace_inject.h"
#include "cli/inject/stop_wait.h"
#include "cli/inject/target_libc.h"

namespace ftjit::inject {

using detail::errno_message;
using Clock = std::chrono::steady_clock;

namespace {

// Grace period to collect the exit of threads of a process that died.
constexpr auto kGrace = std::chrono::milliseconds(2000);

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
    // Its call chain, unwound once per stop (remote unwinding is a ptrace
    // read per word: the checks of one stop share it).
    std::optional<Result<std::vector<detail::StackFrame>>> frames;
  };
  pid_t pid = 0;
  bool we_are_parent = false;
  std::vector<Thread> threads;
  bool dead = false;
  bool detached = false;
  sigset_t old_mask{};

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
    detail::StopWait stop_wait(2'000'000);
    for (;;) {
      bool all = true;
      for (Thread& t : threads) {
        if (t.run != Run::kRunning) continue;
        Event ev = poll(t.tid);
        switch (ev.kind) {
          case EventKind::kNone: all = false; break;
          case EventKind::kStopEvent:
            t.run = Run::kStopped;
            t.frames.reset();
            break;
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
      std::erase_if(threads, [&](const Thread& t) { return t.run == Run::kGone; });
      if (all) return {};
      if (Clock::now() > deadline) {
        std::string tids;
        for (const Thread& t : threads)
          if (t.run == Run::kRunning) tids += (tids.empty() ? "" : ",") + std::to_string(t.tid);
        return make_error(FTJIT_E_SYSTEM, "thread(s) " + tids + " of " + p() +
                                              " did not stop in time (uninterruptible sleep: vfork, disk or NFS I/O?); retry later");
      }
      stop_wait.pause();
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
          return detail::seize_refused(pid, tid, err);
        }
        threads.push_back({tid, Run::kRunning, {}});
        ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
      }
      FTJIT_TRY(wait_all_stopped(deadline));
    }
  }

  // ---------------------------------------------------------------------
  // Detach
  // ---------------------------------------------------------------------

  // Collects the exits of the threads of a dead process (traced zombies
  // stay until their tracer waits, and hold up the parent's waitpid).
  void reap_dead() {
    auto deadline = Clock::now() + kGrace;
    detail::StopWait stop_wait(2'000'000);
    for (;;) {
      bool all = true;
      for (Thread& t : threads) {
        if (t.run == Run::kGone) continue;
        if (poll(t.tid).kind != EventKind::kExited) all = false;
      }
      if (all || Clock::now() > deadline) return;
      stop_wait.pause();
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
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return result;
  }
};

namespace {

// A stopped thread's call chain, unwound at its first use in this stop.
Result<std::vector<detail::StackFrame>>& frames_of(StoppedProcess::State::Thread& t) {
  if (!t.frames) t.frames = detail::call_frames(t.tid, 4096);
  return *t.frames;
}

}  // namespace

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

  // From here until detach, Ctrl-C and friends wait (a killed injector
  // would do no harm, but its user expects the threads let go first).
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
  return stopped;
}

Result<std::string> StoppedProcess::find_references(std::span<const detail::AddressRange> ranges,
                                                    std::span<const detail::AddressRange> ends,
                                                    std::span<const detail::AddressRange> data_holders) {
  auto maps = detail::read_maps(s_->pid);
  FTJIT_TRY(maps);
  // A return address saved by a pac-ret frame (in x30, on the stack) is
  // signed: it names the agent's code once its PAC is cleared.
  uint64_t signature_mask = 0;
  auto hit = [&](uint64_t v) -> const detail::AddressRange* {
    for (const detail::AddressRange& r : ranges)
      if (r.contains(v) || r.contains(v & ~signature_mask)) return &r;
    return nullptr;
  };
  auto hex = [](uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%" PRIx64, v);
    return std::string(b);
  };
  for (State::Thread& t : s_->threads) {
    if (t.run != State::Run::kStopped) continue;
    const std::string who = "thread " + std::to_string(t.tid);
    signature_mask = detail::code_signature_mask(t.tid);
    auto regs = detail::read_stopped_registers(t.tid);
    FTJIT_TRY(regs);
    if (const auto* r = hit(regs->pc)) return who + " is executing " + r->what + " (pc " + hex(regs->pc) + ")";
    for (uint64_t v : regs->general)
      if (const auto* r = hit(v)) return who + " holds an address in " + r->what + " (" + hex(v) + ") in a register";
    // Its call chain, unwound from the CFI of its modules (signal frames
    // included): the return addresses it will take. Every stack word would
    // also count stale slots (an ASan frame's leftovers) and keep the agent
    // loaded for nothing.
    auto& frames = frames_of(t);
    if (!frames) return who + "'s stack cannot be unwound";
    for (const detail::StackFrame& f : *frames)
      if (const auto* r = hit(f.ip)) return who + " returns into " + r->what + " (" + hex(f.ip) + ")";
    const uint64_t last = frames->empty() ? 0 : frames->back().ip;
    if (!ends.empty() &&
        std::none_of(ends.begin(), ends.end(), [&](const detail::AddressRange& r) { return r.contains(last); })) {
      return who + "'s call chain cannot be followed past " + std::to_string(frames->size()) + " frames (" +
             hex(last) + ")";
    }
    for (size_t i = 0; i + 1 < frames->size(); ++i) {
      const detail::StackFrame& f = (*frames)[i];
      if (std::none_of(data_holders.begin(), data_holders.end(),
                       [&](const detail::AddressRange& r) { return r.contains(f.ip); }))
        continue;
      const uint64_t lo = f.sp, hi = (*frames)[i + 1].sp;
      if (hi <= lo || hi - lo > (1u << 20)) continue;
      auto words = detail::read_target_memory(s_->pid, lo, hi - lo);
      if (!words) return who + "'s stack cannot be read: " + words.error().message;
      for (size_t at = 0; at + 8 <= words->size(); at += 8) {
        uint64_t v;
        std::memcpy(&v, words->data() + at, 8);
        if (const auto* r = hit(v))
          return who + "'s unwinder holds an address in " + r->what + " (" + hex(v) + ")";
      }
    }
  }
  return std::string();
}

std::vector<pid_t> StoppedProcess::stopped_threads() const {
  std::vector<pid_t> out;
  for (const State::Thread& t : s_->threads)
    if (t.run == State::Run::kStopped) out.push_back(t.tid);
  return out;
}

std::string StoppedProcess::find_in_call_chains(std::span<const detail::AddressRange> code,
                                                std::span<const detail::AddressRange> ends) {
  for (State::Thread& t : s_->threads) {
    if (t.run != State::Run::kStopped) continue;
    const pid_t tid = t.tid;
    auto& frames = frames_of(t);
    if (!frames) return "thread " + std::to_string(tid) + "'s stack cannot be unwound";
    std::vector<uint64_t> chain_ips;
    for (const detail::StackFrame& f : *frames) chain_ips.push_back(f.ip);
    const std::vector<uint64_t>* chain = &chain_ips;
    for (size_t i = 0; i < chain->size(); ++i) {
      // The pc itself, then return addresses (one past their call).
      uint64_t ip = i == 0 ? (*chain)[i] : (*chain)[i] - 1;
      for (const detail::AddressRange& r : code)
        if (r.contains(ip)) return "thread " + std::to_string(tid) + " is inside " + r.what;
    }
    const uint64_t last = chain->empty() ? 0 : chain->back();
    if (!ends.empty() && std::none_of(ends.begin(), ends.end(), [&](const detail::AddressRange& r) { return r.contains(last); }))
      return "thread " + std::to_string(tid) + "'s stack cannot be unwound past " + std::to_string(chain->size()) + " frames";
  }
  return "";
}

void StoppedProcess::detach_except(pid_t keep) {
  for (State::Thread& t : s_->threads) {
    if (t.tid == keep || t.run != State::Run::kStopped) continue;
    if (::ptrace(PTRACE_DETACH, t.tid, nullptr, nullptr) == 0) t.run = State::Run::kGone;  // no longer ours
  }
}

Status StoppedProcess::detach() { return s_ ? s_->detach() : Status{}; }

}  // namespace ftjit::inject
