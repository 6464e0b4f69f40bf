// SPDX-License-Identifier: MIT
// ThreadCall for arm64 (AArch64) processes: see thread_call.h for the
// contract. The design is x86_64/thread_call.cpp's; what differs is the
// shape of the signal frame and how the call's return reaches it.
//
//   the chosen thread's stack during a call
//
//   original sp  ->  +----------------------------------+
//                    | 512 B margin (AAPCS64 has no red |
//                    | zone: kept all the same)         |
//   scratch_top  ->  +----------------------------------+
//                    | push_string() data, growing down |
//                    +----------------------------------+
//                    | frame record: x29, x30 as they   |  the call's x29 points here,
//                    | were                             |  as a handler's does
//                    +----------------------------------+
//                    | ucontext: x0-x30, sp, pc, pstate |
//                    | as they were, the signal mask;   |
//                    | in uc_mcontext.__reserved the    |
//                    | records: fpsimd_context (V0-V31, |
//                    | FPSR, FPCR), poe_context (if the |
//                    | CPU has POE), then the null one  |
//   call sp      ->  | siginfo (128 B of zeros)         |  struct rt_sigframe: 16-byte
//                    +----------------------------------+  aligned, as sigreturn wants
//                    | the function's own frames        |
//
// There is no return address on the stack: the function is entered with
// x30 = the vDSO's __kernel_rt_sigreturn (`mov x8, #139; svc #0`), the
// trampoline the kernel itself returns signal handlers through (glibc has
// none on arm64). Its `ret` goes there with sp back at the call's sp
// (AAPCS64: the callee restores sp), and rt_sigreturn reads struct
// rt_sigframe at sp exactly as after a handler the kernel entered
// (arch/arm64/kernel/signal.c: sp must be 16-byte aligned, the records in
// __reserved are parsed by parse_user_sigframe: 16-byte aligned, known
// magics, an fpsimd_context of exactly its size, a null record at the
// end). It loads x0-x30, sp, pc, pstate, V0-V31, FPSR, FPCR, POR_EL0 and
// the signal mask from it. The frame record above it is for unwinders only
// (the vDSO's CFI for the trampoline finds the caller through x29 there,
// as after a handler); sigreturn does not read it.
//
// A system call the thread was blocked in needs no rewind in the frame,
// unlike on x86-64: arm64 rewinds it for the restart before the ptrace
// stop (save_state says more), so `saved` already holds the registers that
// run it again.
//
// What the frame does not carry:
//   - SVE: without an sve_context record, rt_sigreturn restores the
//     FP/SIMD view only and drops the thread to FP/SIMD-only state (Z
//     registers beyond their low 128 bits, P registers and FFR read as
//     zero again). After a system call they are zero already (the kernel
//     flushes them on syscall entry), so a blocked thread loses nothing; a
//     thread stopped in SVE code would, and is not chosen (nor adopted)
//     while any of those bits is set.
//   - SME: a thread in streaming mode is not chosen either; ZA, ZT0,
//     TPIDR2 and FPMR (no records for them) are left as the call leaves
//     them, which for dlopen/dlclose is as they were.
//   - A guarded control stack (GCS): the call's `ret` to the trampoline
//     would not match the shadow stack, so threads with GCS on are refused.
#include "cli/inject/thread_call.h"

#include <asm/ptrace.h>  // before <sys/ptrace.h>, which then drops its duplicates
#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject {

using detail::errno_message;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kStackMargin = 512;
constexpr uint64_t kScratchLimit = 16 * 1024;
constexpr size_t kSveBufferSize = 64 * 1024;  // > NT_ARM_SVE at the largest vector length in use (2048 bits: ~9 KiB)
constexpr size_t kMaxFrames = 4096;
constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD
constexpr uint64_t kTrampolineSize = 8;       // mov x8, #139; svc #0
// An ss_flags value do_sigaltstack() refuses (-EINVAL, which rt_sigreturn's
// restore_altstack ignores): the thread's alternate signal stack, which we
// cannot read, is then left as it is.
constexpr int kLeaveAltStackAlone = 4;
// Regsets younger than these headers (include/uapi/linux/elf.h).
constexpr unsigned kNtArmSsve = 0x40b;     // NT_ARM_SSVE: streaming-mode SVE (SME)
constexpr unsigned kNtArmPoe = 0x40f;      // NT_ARM_POE: POR_EL0 (permission overlays)
constexpr unsigned kNtArmGcs = 0x410;      // NT_ARM_GCS: struct user_gcs
constexpr uint64_t kGcsEnabled = 1;        // PR_SHADOW_STACK_ENABLE
// asm/sigcontext.h since Linux 6.12: struct poe_context.
constexpr uint32_t kPoeMagic = 0x504f4530;
struct PoeContext {
  struct _aarch64_ctx head;
  uint64_t por_el0;
};

// arch/arm64/kernel/signal.c's struct rt_sigframe: siginfo, then the
// kernel's struct ucontext (arch/arm64/include/uapi/asm/ucontext.h), whose
// layout glibc's ucontext_t repeats: flags, link, stack, a 1024-bit
// sigset (the kernel reads the first 64 bits), then struct sigcontext.
struct RtSigframe {
  siginfo_t info;
  ucontext_t uc;
};
struct FrameRecord {
  uint64_t fp;
  uint64_t lr;
};
static_assert(sizeof(siginfo_t) == 128);
static_assert(offsetof(ucontext_t, uc_stack) == 16);
static_assert(offsetof(ucontext_t, uc_sigmask) == 40);
static_assert(offsetof(ucontext_t, uc_mcontext) == 176);
// mcontext_t is the uapi struct sigcontext (asm/sigcontext.h).
static_assert(sizeof(mcontext_t) == sizeof(struct sigcontext));
static_assert(sizeof(struct sigcontext) == 4384);
static_assert(offsetof(mcontext_t, regs) == offsetof(struct sigcontext, regs));
static_assert(offsetof(mcontext_t, sp) == offsetof(struct sigcontext, sp));
static_assert(offsetof(mcontext_t, pc) == offsetof(struct sigcontext, pc));
static_assert(offsetof(mcontext_t, pstate) == offsetof(struct sigcontext, pstate));
static_assert(offsetof(mcontext_t, __reserved) == offsetof(struct sigcontext, __reserved));
static_assert(offsetof(struct sigcontext, __reserved) == 288);
static_assert(offsetof(RtSigframe, uc) == 128);
static_assert(sizeof(RtSigframe) == 128 + 4560);
// parse_user_sigframe: __reserved, and every record in it, 16-byte aligned
// (the frame itself is: sp).
static_assert(offsetof(RtSigframe, uc.uc_mcontext.__reserved) % 16 == 0);
static_assert(sizeof(RtSigframe) % 16 == 0);
static_assert(sizeof(struct _aarch64_ctx) == 8);
static_assert(sizeof(struct fpsimd_context) == 528 && sizeof(struct fpsimd_context) % 16 == 0);
static_assert(sizeof(PoeContext) == 16);
static_assert(sizeof(struct fpsimd_context) + sizeof(PoeContext) + sizeof(struct _aarch64_ctx) <=
              sizeof(mcontext_t::__reserved));
static_assert(sizeof(struct user_pt_regs) == 34 * 8);
static_assert(sizeof(FrameRecord) == 16);

// Syscalls a thread can be found blocked in that restart exactly as they
// would without us, and that hold no lock of the loader or malloc: a thread
// waiting in one is the best one to borrow. (arm64 has the asm-generic
// table: no select, pause, poll or epoll_wait, only their p-variants.)
bool waits_for_the_outside(long nr) {
  switch (nr) {
    case SYS_read: case SYS_readv: case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg:
    case SYS_accept: case SYS_accept4: case SYS_epoll_pwait:
    case SYS_wait4: case SYS_waitid: case SYS_rt_sigsuspend:
    case SYS_rt_sigtimedwait: case SYS_pselect6: case SYS_msgrcv:
      return true;
    default:
      return false;
  }
}

// Waits that may hold a restart block (a relative timeout): rt_sigreturn
// forgets it, so the wait is restarted whole (it takes longer, it does not
// fail).
bool waits_with_timeout(long nr) {
  return nr == SYS_futex || nr == SYS_ppoll || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

// Polls without blocking, sleeping a little longer each time (10 us .. 1 ms).
class Backoff {
 public:
  void sleep() {
    timespec ts{0, static_cast<long>(ns_)};
    ::nanosleep(&ts, nullptr);
    ns_ = std::min<long long>(ns_ * 2, 1'000'000);
  }

 private:
  long long ns_ = 10'000;
};

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
      rank = waits_for_the_outside(nr) ? 0 : waits_with_timeout(nr) ? 1 : 3;
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

long get_regset(pid_t tid, unsigned type, void* data, size_t size, size_t* got = nullptr) {
  iovec iov{data, size};
  long r = ::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(static_cast<uintptr_t>(type)), &iov);
  if (got) *got = r == 0 ? iov.iov_len : 0;
  return r;
}

long set_regset(pid_t tid, unsigned type, const void* data, size_t size) {
  iovec iov{const_cast<void*>(data), size};
  return ::ptrace(PTRACE_SETREGSET, tid, reinterpret_cast<void*>(static_cast<uintptr_t>(type)), &iov);
}

}  // namespace

struct ThreadCall::State {
  enum class Phase { kStopped, kRunning, kReturned, kReleased, kGone };

  pid_t pid = 0;
  pid_t tid = 0;
  bool we_are_parent = false;
  bool adopted = false;  // a StoppedProcess's thread: never detached here
  Phase phase = Phase::kReleased;
  uint64_t restore_rt = 0;
  std::optional<int64_t> errno_tpoff;

  user_pt_regs saved{};        // NT_PRSTATUS
  user_fpsimd_state fpsimd{};  // NT_PRFPREG
  uint64_t tls = 0;            // NT_ARM_TLS: tpidr_el0, the thread pointer
  std::optional<uint64_t> por_el0;  // NT_ARM_POE, where the CPU has permission overlays
  uint64_t sigmask = 0;
  std::string vector_state;  // "" or the SVE/SME state a frame would not bring back
  std::optional<int32_t> saved_errno;
  uint64_t scratch_top = 0;
  uint64_t scratch_used = 0;
  uint64_t frame = 0;  // the call's sp: struct rt_sigframe
  uint64_t function_ = 0;

  std::string p() const { return "process " + std::to_string(pid); }
  std::string t() const { return "thread " + std::to_string(tid); }
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
    Backoff backoff;
    for (;;) {
      StopEvent ev = poll();
      if (ev.kind != Stop::kNone) return ev;
      if (detail::process_gone(pid)) return {Stop::kExited, 0};
      if (Clock::now() > deadline) return {};
      backoff.sleep();
    }
  }

  // ---------------------------------------------------------------------
  // Seizing
  // ---------------------------------------------------------------------

  // Seizes tid and waits for its interrupt stop. Signals that arrive on
  // the way are delivered as they would have been.
  Status stop_thread(Clock::time_point deadline) {
    if (::ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0)
      return detail::seize_refused(pid, tid, errno);
    phase = Phase::kStopped;
    ::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    for (;;) {
      StopEvent ev = wait(deadline);
      switch (ev.kind) {
        case Stop::kExited:
          phase = Phase::kGone;
          if (detail::process_gone(pid)) return exited();
          return make_error(FTJIT_E_SYSTEM, t() + " of " + p() + " exited");
        case Stop::kNone:
          return make_error(FTJIT_E_SYSTEM, t() + " of " + p() +
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

  // "" or why the thread's vector state would not come back whole through
  // a frame of FP/SIMD records (see the top of this file).
  std::string sve_state_beyond_fpsimd() {
    // Streaming mode (SME): NT_ARM_SSVE has register data only while it is on.
    user_sve_header h{};
    size_t got = 0;
    if (get_regset(tid, kNtArmSsve, &h, sizeof h, &got) == 0 && got >= sizeof h &&
        (h.flags & SVE_PT_REGS_MASK) == SVE_PT_REGS_SVE)
      return "in streaming SVE mode";
    std::vector<uint8_t> sve(kSveBufferSize);
    if (get_regset(tid, NT_ARM_SVE, sve.data(), sve.size(), &got) != 0 || got < sizeof h) return "";  // no SVE
    std::memcpy(&h, sve.data(), sizeof h);
    if ((h.flags & SVE_PT_REGS_MASK) != SVE_PT_REGS_SVE) return "";  // its state is FP/SIMD only
    const std::string busy = "running SVE code (its vector state beyond FP/SIMD would be lost)";
    const size_t vq = __sve_vq_from_vl(h.vl);
    const size_t end = SVE_PT_SVE_FFR_OFFSET(vq) + SVE_PT_SVE_FFR_SIZE(vq);
    if (vq == 0 || end > got) return busy;
    auto any_set = [&](size_t from, size_t to) {
      return std::any_of(sve.begin() + static_cast<ptrdiff_t>(from), sve.begin() + static_cast<ptrdiff_t>(to),
                         [](uint8_t b) { return b != 0; });
    };
    // Each Z register's bytes past its low 128 bits (V0-V31, which the
    // frame keeps), then P0-P15 and FFR, which follow each other.
    for (size_t n = 0; n < __SVE_NUM_ZREGS; ++n) {
      const size_t z = SVE_PT_SVE_ZREG_OFFSET(vq, n);
      if (any_set(z + __SVE_VQ_BYTES, z + SVE_PT_SVE_ZREG_SIZE(vq))) return busy;
    }
    if (any_set(SVE_PT_SVE_PREGS_OFFSET(vq), end)) return busy;
    return "";
  }

  Status save_state() {
    if (get_regset(tid, NT_PRSTATUS, &saved, sizeof saved) != 0)
      return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGSET of " + t(), errno));
    if (get_regset(tid, NT_PRFPREG, &fpsimd, sizeof fpsimd) != 0)
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the FP/SIMD registers of " + t(), errno));
    // NT_ARM_TLS is tpidr_el0, then tpidr2_el0 where SME exists.
    uint64_t tls_regs[2] = {0, 0};
    if (get_regset(tid, NT_ARM_TLS, tls_regs, sizeof tls_regs) != 0)
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the thread pointer of " + t(), errno));
    tls = tls_regs[0];
    if (::ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof sigmask), &sigmask) != 0)
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the signal mask of " + t(), errno));

    // A system call the thread was blocked in. Unlike x86-64, arm64 makes
    // the restart before the stop: do_signal() rewinds pc over the `svc`
    // and puts orig_x0 back in x0 before it calls get_signal() (on
    // purpose: a debugger is to see the rewound pc), forgets the syscall
    // (its number then reads -1), and only then stops for our interrupt. The registers
    // read here are therefore those of the restarted syscall (pc at its
    // `svc`, x8 its number, x0-x5 its arguments): the frame needs no
    // rewind of its own. A restart block (a relative timeout) does not
    // survive rt_sigreturn: that syscall is started again whole. Only a
    // syscall stop, which we never leave the thread in, shows the syscall
    // still under way (a number >= 0, x0 = -ERESTART*); its orig_x0 is
    // not visible through ptrace, so such a state is not used.
    int32_t syscall_nr = -1;
    if (get_regset(tid, NT_ARM_SYSTEM_CALL, &syscall_nr, sizeof syscall_nr) == 0 && syscall_nr >= 0)
      return make_error(FTJIT_E_SYSTEM, t() + " of " + p() + " is stopped inside system call " +
                                            std::to_string(syscall_nr) + " (a syscall stop): retry");

    struct {
      uint64_t features_enabled, features_locked, gcspr_el0;
    } gcs{};
    if (get_regset(tid, kNtArmGcs, &gcs, sizeof gcs) == 0 && (gcs.features_enabled & kGcsEnabled) != 0)
      return make_error(FTJIT_E_UNSUPPORTED, t() + " of " + p() +
                                                 " runs with a guarded control stack (GCS), which a call made by ftjit "
                                                 "would not match; start the program with `ftjit run` instead");
    vector_state = sve_state_beyond_fpsimd();
    uint64_t por = 0;
    if (get_regset(tid, kNtArmPoe, &por, sizeof por) == 0) por_el0 = por;

    if (errno_tpoff) {
      auto e = detail::read_target_memory(pid, tls + static_cast<uint64_t>(*errno_tpoff), 4);
      if (e) {
        int32_t v;
        std::memcpy(&v, e->data(), 4);
        saved_errno = v;
      }
    }
    scratch_top = (saved.sp - kStackMargin) & ~uint64_t{15};
    return {};
  }

  // Why this thread must not run the loader now, or "" if it may: the
  // code it is in, or a frame of its call chain, holds a lock dlopen takes
  // (a signal handler on top of malloc, a dl_iterate_phdr callback); or
  // its SVE state would not come back.
  std::string unsafe_because(const detail::TargetLibc& libc) {
    if (const detail::AddressRange* r = libc.holder_of(saved.pc)) return "inside " + r->what;
    if (!vector_state.empty()) return vector_state;
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

  // The signal frame that brings the thread back to `saved`, and the frame
  // record above it (the picture at the top of this file).
  std::vector<uint8_t> build_frame() {
    std::vector<uint8_t> bytes(sizeof(RtSigframe) + sizeof(FrameRecord), 0);

    RtSigframe f;
    std::memset(&f, 0, sizeof f);  // siginfo, uc_flags, uc_link, fault_address: 0
    f.uc.uc_stack.ss_flags = kLeaveAltStackAlone;
    mcontext_t& mc = f.uc.uc_mcontext;
    std::memcpy(mc.regs, saved.regs, sizeof mc.regs);
    mc.sp = saved.sp;
    mc.pc = saved.pc;
    mc.pstate = saved.pstate;
    std::memcpy(&f.uc.uc_sigmask, &sigmask, sizeof sigmask);

    // __reserved: the FP/SIMD record, a POE record where the CPU has
    // permission overlays, then the null record (already 0) that ends the
    // list. restore_fpsimd_context() and restore_poe_context() want these
    // exact sizes. (The POE record is not optional in practice: the
    // rt_sigreturn of some kernels since 6.12 writes POR_EL0 from a value
    // that only this record sets.)
    struct fpsimd_context fp;
    std::memset(&fp, 0, sizeof fp);
    fp.head.magic = FPSIMD_MAGIC;
    fp.head.size = sizeof fp;
    fp.fpsr = fpsimd.fpsr;
    fp.fpcr = fpsimd.fpcr;
    std::memcpy(fp.vregs, fpsimd.vregs, sizeof fp.vregs);
    std::memcpy(mc.__reserved, &fp, sizeof fp);
    if (por_el0) {
      const PoeContext poe{{kPoeMagic, sizeof(PoeContext)}, *por_el0};
      std::memcpy(mc.__reserved + sizeof fp, &poe, sizeof poe);
    }
    std::memcpy(bytes.data(), &f, sizeof f);

    // As the kernel's get_sigframe()/setup_sigframe() do for a handler.
    const FrameRecord record{saved.regs[29], saved.regs[30]};
    std::memcpy(bytes.data() + sizeof f, &record, sizeof record);
    return bytes;
  }

  // Puts every register, the FP/SIMD state, the thread pointer and the
  // signal mask back as they were at the stop, for a call that crashed;
  // the thread must be in a signal-delivery stop, outside any syscall (a
  // fault), so that the kernel makes no restart of its own on top: a
  // syscall it was blocked in runs again from its `svc`, as it would have.
  void restore_in_place() {
    set_regset(tid, NT_PRSTATUS, &saved, sizeof saved);
    set_regset(tid, NT_PRFPREG, &fpsimd, sizeof fpsimd);
    set_regset(tid, NT_ARM_TLS, &tls, sizeof tls);
    if (por_el0) set_regset(tid, kNtArmPoe, &*por_el0, sizeof *por_el0);
    ::ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof sigmask), &sigmask);
  }

  void put_errno_back() {
    if (!errno_tpoff || !saved_errno) return;
    int32_t v = *saved_errno;
    (void)detail::write_target_memory(pid, tls + static_cast<uint64_t>(*errno_tpoff),
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
      return make_error(FTJIT_E_SYSTEM, t() + " of " + p() + " does not stop; " + why);
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
    const uint64_t record = top - sizeof(FrameRecord);
    frame = record - sizeof(RtSigframe);
    FTJIT_TRY(detail::write_target_memory(pid, frame, build_frame()));

    user_pt_regs regs = saved;
    regs.sp = frame;
    regs.pc = function;
    regs.regs[30] = restore_rt;  // the function's `ret` goes to rt_sigreturn
    regs.regs[29] = record;
    for (size_t i = 0; i < args.size(); ++i) regs.regs[i] = args[i];
    // BTYPE belongs to the instruction the thread stopped at (the one after
    // an indirect branch): the function's first instruction is entered
    // with none. The frame keeps the thread's own pstate.
    regs.pstate &= ~static_cast<uint64_t>(PSR_BTYPE_MASK);
    // No syscall restart on the way into the call: the syscall number is
    // already -1 here (save_state).
    // Registers first, mask second: killed in between, the call runs with
    // the thread's own mask and its frame restores that same mask.
    if (set_regset(tid, NT_PRSTATUS, &regs, sizeof regs) != 0) {
      if (errno == ESRCH) return exited();
      return make_error(FTJIT_E_SYSTEM, errno_message("cannot set the registers of " + t(), errno));
    }
    // Every signal waits until the frame's mask is back: no handler runs on
    // top of the loader (nor longjmps out of it).
    const uint64_t all = ~uint64_t{0};
    ::ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof all), &all);
    if (::ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr) != 0) return exited();
    phase = Phase::kRunning;
    function_ = function;
    return {};
  }

  // Follows the running call until it returns (true), or until deadline
  // (false; with give_up, the call is then left to finish by itself and
  // that is the error).
  Result<bool> follow(Clock::time_point deadline, std::chrono::milliseconds timeout, bool give_up) {
    if (phase == Phase::kReturned) return true;
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
          ::ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr);
          break;
        case Stop::kSyscall: {
          // Our rt_sigreturn: entered from the trampoline (pc is past its
          // `svc`) with sp at our frame. (At syscall stops arm64 shows x7
          // as 0/1 for entry/exit; nothing here reads or writes it.)
          __ptrace_syscall_info info{};
          if (::ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info) > 0 &&
              info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_rt_sigreturn &&
              info.instruction_pointer == restore_rt + kTrampolineSize && info.stack_pointer == frame) {
            phase = Phase::kReturned;
            return true;
          }
          ::ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr);
          break;
        }
        case Stop::kSignal: {
          siginfo_t si;
          std::memset(&si, 0, sizeof si);
          ::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
          if (!is_fault(ev.sig, si)) {
            // Not blocked by the call's mask (the function unblocked it):
            // delivered as the program would get it.
            ::ptrace(PTRACE_SYSCALL, tid, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(ev.sig)));
            break;
          }
          user_pt_regs now{};
          get_regset(tid, NT_PRSTATUS, &now, sizeof now);
          char where[64];
          std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(now.pc));
          // In the signal-delivery stop: put back, detach with no signal.
          restore_in_place();
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
      case Phase::kStopped:
        phase = Phase::kReleased;
        if (adopted) return {};  // stays stopped: its owner lets it go
        if (::ptrace(PTRACE_DETACH, tid, nullptr, nullptr) != 0 && errno == ESRCH && detail::process_gone(pid))
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
uint64_t ThreadCall::thread_pointer() const { return s_->tls; }

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
  // the call would silently cost the thread its SVE state.
  if (!s->vector_state.empty())
    return make_error(FTJIT_E_SYSTEM, "thread " + std::to_string(tid) + " of process " + std::to_string(pid) +
                                          " is " + s->vector_state + "; retry");
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
