// SPDX-License-Identifier: MIT
// detail::ThreadState (thread_state.h) for arm64 (AArch64) processes: the
// half of ThreadCall that knows their registers and signal frame. What
// differs from x86-64 is the shape of the signal frame and how the call's
// return reaches it.
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
// as after a handler); sigreturn does not read it. (At the syscall stops
// that follow the call, arm64 shows x7 as 0/1 for entry/exit; nothing
// reads or writes it.)
//
// A system call the thread was blocked in needs no rewind in the frame,
// unlike on x86-64: arm64 rewinds it for the restart before the ptrace
// stop (save says more), so `saved` already holds the registers that
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
#include "cli/inject/thread_state.h"

#include <asm/ptrace.h>  // before <sys/ptrace.h>, which then drops its duplicates
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject::detail {

namespace {

constexpr size_t kSveBufferSize = 64 * 1024;  // > NT_ARM_SVE at the largest vector length in use (2048 bits: ~9 KiB)
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

// "" or why the thread's vector state would not come back whole through
// a frame of FP/SIMD records (see the top of this file).
std::string sve_state_beyond_fpsimd(pid_t tid) {
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

}  // namespace

// (arm64 has the asm-generic table: no select, pause, poll or epoll_wait,
// only their p-variants.)
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

bool waits_with_timeout(long nr) {
  return nr == SYS_futex || nr == SYS_ppoll || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

struct ThreadState::Registers {
  user_pt_regs saved{};        // NT_PRSTATUS
  user_fpsimd_state fpsimd{};  // NT_PRFPREG
  uint64_t tls = 0;            // NT_ARM_TLS: tpidr_el0, the thread pointer
  std::optional<uint64_t> por_el0;  // NT_ARM_POE, where the CPU has permission overlays
  uint64_t sigmask = 0;
  std::string vector_state;  // "" or the SVE/SME state a frame would not bring back
};

ThreadState::ThreadState() : r_(std::make_unique<Registers>()) {}
ThreadState::~ThreadState() = default;

Status ThreadState::save(pid_t pid, pid_t tid) {
  Registers& r = *r_;
  const std::string t = "thread " + std::to_string(tid), p = "process " + std::to_string(pid);
  if (get_regset(tid, NT_PRSTATUS, &r.saved, sizeof r.saved) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGSET of " + t, errno));
  if (get_regset(tid, NT_PRFPREG, &r.fpsimd, sizeof r.fpsimd) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the FP/SIMD registers of " + t, errno));
  // NT_ARM_TLS is tpidr_el0, then tpidr2_el0 where SME exists.
  uint64_t tls_regs[2] = {0, 0};
  if (get_regset(tid, NT_ARM_TLS, tls_regs, sizeof tls_regs) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the thread pointer of " + t, errno));
  r.tls = tls_regs[0];
  if (::ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof r.sigmask), &r.sigmask) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the signal mask of " + t, errno));

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
    return make_error(FTJIT_E_SYSTEM, t + " of " + p + " is stopped inside system call " +
                                          std::to_string(syscall_nr) + " (a syscall stop): retry");

  struct {
    uint64_t features_enabled, features_locked, gcspr_el0;
  } gcs{};
  if (get_regset(tid, kNtArmGcs, &gcs, sizeof gcs) == 0 && (gcs.features_enabled & kGcsEnabled) != 0)
    return make_error(FTJIT_E_UNSUPPORTED, t + " of " + p +
                                               " runs with a guarded control stack (GCS), which a call made by ftjit "
                                               "would not match; start the program with `ftjit run` instead");
  r.vector_state = sve_state_beyond_fpsimd(tid);
  uint64_t por = 0;
  if (get_regset(tid, kNtArmPoe, &por, sizeof por) == 0) r.por_el0 = por;
  return {};
}

uint64_t ThreadState::pc() const { return r_->saved.pc; }
uint64_t ThreadState::sp() const { return r_->saved.sp; }
uint64_t ThreadState::thread_pointer() const { return r_->tls; }
const std::string& ThreadState::state_a_frame_loses() const { return r_->vector_state; }

// The signal frame that brings the thread back to `saved`, and the frame
// record above it (the picture at the top of this file).
CallFrame ThreadState::frame_below(uint64_t top, uint64_t /*restore_rt: entered in x30*/) const {
  const Registers& r = *r_;
  CallFrame out;
  out.address = top - sizeof(FrameRecord) - sizeof(RtSigframe);
  out.sigreturn_sp = out.address;  // the callee restores sp before its `ret`
  std::vector<uint8_t>& bytes = out.bytes;
  bytes.assign(sizeof(RtSigframe) + sizeof(FrameRecord), 0);

  RtSigframe f;
  std::memset(&f, 0, sizeof f);  // siginfo, uc_flags, uc_link, fault_address: 0
  f.uc.uc_stack.ss_flags = kLeaveAltStackAlone;
  mcontext_t& mc = f.uc.uc_mcontext;
  std::memcpy(mc.regs, r.saved.regs, sizeof mc.regs);
  mc.sp = r.saved.sp;
  mc.pc = r.saved.pc;
  mc.pstate = r.saved.pstate;
  std::memcpy(&f.uc.uc_sigmask, &r.sigmask, sizeof r.sigmask);

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
  fp.fpsr = r.fpsimd.fpsr;
  fp.fpcr = r.fpsimd.fpcr;
  std::memcpy(fp.vregs, r.fpsimd.vregs, sizeof fp.vregs);
  std::memcpy(mc.__reserved, &fp, sizeof fp);
  if (r.por_el0) {
    const PoeContext poe{{kPoeMagic, sizeof(PoeContext)}, *r.por_el0};
    std::memcpy(mc.__reserved + sizeof fp, &poe, sizeof poe);
  }
  std::memcpy(bytes.data(), &f, sizeof f);

  // As the kernel's get_sigframe()/setup_sigframe() do for a handler.
  const FrameRecord record{r.saved.regs[29], r.saved.regs[30]};
  std::memcpy(bytes.data() + sizeof f, &record, sizeof record);
  return out;
}

int ThreadState::enter_call(pid_t tid, const CallFrame& frame, uint64_t function, std::span<const uint64_t> args,
                            uint64_t restore_rt) const {
  user_pt_regs regs = r_->saved;
  regs.sp = frame.address;
  regs.pc = function;
  regs.regs[30] = restore_rt;  // the function's `ret` goes to rt_sigreturn
  regs.regs[29] = frame.address + sizeof(RtSigframe);  // the frame record
  for (size_t i = 0; i < args.size(); ++i) regs.regs[i] = args[i];
  // BTYPE belongs to the instruction the thread stopped at (the one after
  // an indirect branch): the function's first instruction is entered
  // with none. The frame keeps the thread's own pstate.
  regs.pstate &= ~static_cast<uint64_t>(PSR_BTYPE_MASK);
  // No syscall restart on the way into the call: the syscall number is
  // already -1 here (save).
  return set_regset(tid, NT_PRSTATUS, &regs, sizeof regs) == 0 ? 0 : errno;
}

// Puts every register, the FP/SIMD state, the thread pointer and the
// signal mask back as they were at the stop, for a call that crashed;
// the thread must be in a signal-delivery stop, outside any syscall (a
// fault), so that the kernel makes no restart of its own on top: a
// syscall it was blocked in runs again from its `svc`, as it would have.
void ThreadState::restore_in_place(pid_t tid) const {
  Registers& r = *r_;
  set_regset(tid, NT_PRSTATUS, &r.saved, sizeof r.saved);
  set_regset(tid, NT_PRFPREG, &r.fpsimd, sizeof r.fpsimd);
  set_regset(tid, NT_ARM_TLS, &r.tls, sizeof r.tls);
  if (r.por_el0) set_regset(tid, kNtArmPoe, &*r.por_el0, sizeof *r.por_el0);
  ::ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof r.sigmask), &r.sigmask);
}

}  // namespace ftjit::inject::detail
