// SPDX-License-Identifier: MIT
// detail::ThreadState (thread_state.h) for x86-64 processes: the half of
// ThreadCall that knows their registers and signal frame.
//
//   the chosen thread's stack during a call
//
//   original rsp ->  +----------------------------------+
//                    | red zone (128 B), untouched      |
//                    | 512 B margin                     |
//   scratch_top  ->  +----------------------------------+
//                    | push_string() data, growing down |
//                    +----------------------------------+
//                    | FP/vector state, XSAVE layout,   |  64-byte aligned; its
//                    | then FP_XSTATE_MAGIC2            |  sw_reserved says so
//                    +----------------------------------+
//                    | ucontext: every register as it   |  16-byte aligned
//                    | was (a syscall rewound to be     |
//                    | restarted), the signal mask      |
//   call rsp     ->  | return address: __restore_rt     |  rsp % 16 == 8 at entry
//                    +----------------------------------+
//                    | the function's own frames        |
//
// The function returns into __restore_rt (`mov $15,%rax; syscall`), whose
// rt_sigreturn finds the frame exactly where a signal handler's return
// would: rsp - 8 is the frame, rsp the ucontext. The kernel then loads
// every register, the FP state and the signal mask from it.
#include "cli/inject/thread_state.h"

#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject::detail {

namespace {

constexpr size_t kXstateBufferSize = 64 * 1024;  // > any XSAVE area (AMX: ~11 KiB)
constexpr unsigned long long kEflagsTrap = 0x100;       // TF
constexpr unsigned long long kEflagsDirection = 0x400;  // DF: the ABI wants it clear

// The kernel's restart codes (include/linux/errno.h, not exported).
constexpr long kERestartSys = 512;
constexpr long kERestartNoIntr = 513;
constexpr long kERestartNoHand = 514;
constexpr long kERestartRestartBlock = 516;

// arch/x86/include/uapi/asm/ucontext.h and sigcontext.h.
constexpr unsigned long kUcFpXstate = 0x1;
constexpr unsigned long kUcSigcontextSs = 0x2;
constexpr unsigned long kUcStrictRestoreSs = 0x4;
constexpr uint32_t kFpXstateMagic1 = 0x46505853;
constexpr uint32_t kFpXstateMagic2 = 0x46505845;
constexpr size_t kFxsaveSize = 512;
constexpr size_t kSwReservedOffset = 464;  // struct _fpx_sw_bytes in the FXSAVE area
// An ss_flags value do_sigaltstack() refuses (-EINVAL, which rt_sigreturn
// ignores): the thread's alternate signal stack, which we cannot read, is
// then left as it is.
constexpr int kLeaveAltStackAlone = 4;

// ucontext_t's first part is the kernel's struct ucontext (flags, link,
// stack, sigcontext, then the first 8 bytes of the signal mask).
static_assert(offsetof(ucontext_t, uc_mcontext) == 40);
static_assert(offsetof(ucontext_t, uc_sigmask) == 296);

}  // namespace

bool waits_for_the_outside(long nr) {
  switch (nr) {
    case SYS_read: case SYS_readv: case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg:
    case SYS_accept: case SYS_accept4: case SYS_epoll_wait: case SYS_epoll_pwait:
    case SYS_wait4: case SYS_waitid: case SYS_pause: case SYS_rt_sigsuspend:
    case SYS_rt_sigtimedwait: case SYS_select: case SYS_pselect6: case SYS_msgrcv:
      return true;
    default:
      return false;
  }
}

bool waits_with_timeout(long nr) {
  return nr == SYS_futex || nr == SYS_poll || nr == SYS_ppoll || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

struct ThreadState::Registers {
  user_regs_struct saved{};
  std::vector<uint8_t> xstate;  // NT_X86_XSTATE as read, or empty
  user_fpregs_struct fpregs{};  // when there is no XSAVE state
  uint64_t sigmask = 0;
};

ThreadState::ThreadState() : r_(std::make_unique<Registers>()) {}
ThreadState::~ThreadState() = default;

Status ThreadState::save(pid_t /*pid*/, pid_t tid) {
  Registers& r = *r_;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &r.saved) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGS of thread " + std::to_string(tid), errno));
  r.xstate.assign(kXstateBufferSize, 0);
  iovec iov{r.xstate.data(), r.xstate.size()};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0 &&
      iov.iov_len >= kFxsaveSize + 64) {
    r.xstate.resize(iov.iov_len);
  } else {
    r.xstate.clear();
    if (::ptrace(PTRACE_GETFPREGS, tid, nullptr, &r.fpregs) != 0)
      return make_error(FTJIT_E_SYSTEM,
                        errno_message("cannot read the FP registers of thread " + std::to_string(tid), errno));
  }
  if (::ptrace(PTRACE_GETSIGMASK, tid, reinterpret_cast<void*>(sizeof r.sigmask), &r.sigmask) != 0)
    return make_error(FTJIT_E_SYSTEM,
                      errno_message("cannot read the signal mask of thread " + std::to_string(tid), errno));
  return {};
}

uint64_t ThreadState::pc() const { return r_->saved.rip; }
uint64_t ThreadState::sp() const { return r_->saved.rsp; }
uint64_t ThreadState::thread_pointer() const { return r_->saved.fs_base; }

const std::string& ThreadState::state_a_frame_loses() const {
  static const std::string kNothing;  // the XSAVE image in the frame is all of it
  return kNothing;
}

CallFrame ThreadState::frame_below(uint64_t top, uint64_t restore_rt) const {
  const Registers& r = *r_;
  const size_t fp_size = (r.xstate.empty() ? kFxsaveSize : r.xstate.size() + 4);
  const uint64_t fp_addr = (top - fp_size) & ~uint64_t{63};
  const uint64_t uc_addr = (fp_addr - sizeof(ucontext_t)) & ~uint64_t{15};
  const uint64_t frame_addr = uc_addr - 8;  // the return address slot
  CallFrame out;
  out.address = frame_addr;
  out.sigreturn_sp = frame_addr + 8;  // the `ret` popped it
  std::vector<uint8_t>& bytes = out.bytes;
  bytes.assign(fp_addr + fp_size - frame_addr, 0);
  std::memcpy(bytes.data(), &restore_rt, 8);  // the call's return address

  ucontext_t uc;
  std::memset(&uc, 0, sizeof uc);
  uc.uc_flags = (r.xstate.empty() ? 0 : kUcFpXstate) | kUcSigcontextSs | kUcStrictRestoreSs;
  uc.uc_stack.ss_flags = kLeaveAltStackAlone;
  const user_regs_struct& saved = r.saved;
  greg_t* g = uc.uc_mcontext.gregs;
  g[REG_R8] = static_cast<greg_t>(saved.r8);
  g[REG_R9] = static_cast<greg_t>(saved.r9);
  g[REG_R10] = static_cast<greg_t>(saved.r10);
  g[REG_R11] = static_cast<greg_t>(saved.r11);
  g[REG_R12] = static_cast<greg_t>(saved.r12);
  g[REG_R13] = static_cast<greg_t>(saved.r13);
  g[REG_R14] = static_cast<greg_t>(saved.r14);
  g[REG_R15] = static_cast<greg_t>(saved.r15);
  g[REG_RDI] = static_cast<greg_t>(saved.rdi);
  g[REG_RSI] = static_cast<greg_t>(saved.rsi);
  g[REG_RBP] = static_cast<greg_t>(saved.rbp);
  g[REG_RBX] = static_cast<greg_t>(saved.rbx);
  g[REG_RDX] = static_cast<greg_t>(saved.rdx);
  g[REG_RAX] = static_cast<greg_t>(saved.rax);
  g[REG_RCX] = static_cast<greg_t>(saved.rcx);
  g[REG_RSP] = static_cast<greg_t>(saved.rsp);
  g[REG_RIP] = static_cast<greg_t>(saved.rip);
  g[REG_EFL] = static_cast<greg_t>(saved.eflags);
  // cs, gs, fs, ss as four 16-bit fields; 64-bit sigreturn restores cs
  // and ss only (fs_base and gs_base are untouched).
  g[REG_CSGSFS] = static_cast<greg_t>((saved.cs & 0xffff) | ((saved.ss & 0xffff) << 48));
  // A thread stopped in a blocking syscall: the kernel would restart it
  // on the way out (rip back over the 2-byte `syscall`, rax = its
  // number); rt_sigreturn does not, so the frame does it. A restart block
  // (a relative timeout) does not survive rt_sigreturn: that syscall is
  // started again whole.
  if (static_cast<long long>(saved.orig_rax) >= 0) {
    long err = -static_cast<long>(saved.rax);
    if (err == kERestartSys || err == kERestartNoIntr || err == kERestartNoHand || err == kERestartRestartBlock) {
      g[REG_RAX] = static_cast<greg_t>(saved.orig_rax);
      g[REG_RIP] = static_cast<greg_t>(saved.rip - 2);
    }
  }
  uc.uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp_addr);
  std::memcpy(&uc.uc_sigmask, &r.sigmask, sizeof r.sigmask);
  std::memcpy(bytes.data() + 8, &uc, sizeof uc);

  uint8_t* fp = bytes.data() + (fp_addr - frame_addr);
  if (r.xstate.empty()) {
    std::memcpy(fp, &r.fpregs, kFxsaveSize);  // magic1 0: the kernel restores FXSAVE state only
    std::memset(fp + kSwReservedOffset, 0, kFxsaveSize - kSwReservedOffset);
  } else {
    // ptrace's XSAVE image keeps XCR0 at the start of sw_reserved; a
    // signal frame keeps struct _fpx_sw_bytes there.
    std::memcpy(fp, r.xstate.data(), r.xstate.size());
    uint64_t xcr0;
    std::memcpy(&xcr0, r.xstate.data() + kSwReservedOffset, 8);
    const uint32_t xstate_size = static_cast<uint32_t>(r.xstate.size());
    const uint32_t extended_size = xstate_size + 4;
    std::memset(fp + kSwReservedOffset, 0, kFxsaveSize - kSwReservedOffset);
    std::memcpy(fp + kSwReservedOffset + 0, &kFpXstateMagic1, 4);
    std::memcpy(fp + kSwReservedOffset + 4, &extended_size, 4);
    std::memcpy(fp + kSwReservedOffset + 8, &xcr0, 8);
    std::memcpy(fp + kSwReservedOffset + 16, &xstate_size, 4);
    std::memcpy(fp + r.xstate.size(), &kFpXstateMagic2, 4);
  }
  return out;
}

int ThreadState::enter_call(pid_t tid, const CallFrame& frame, uint64_t function, std::span<const uint64_t> args,
                            uint64_t /*restore_rt: the frame's return address*/) const {
  user_regs_struct regs = r_->saved;
  regs.rsp = frame.address;
  regs.rip = function;
  regs.rax = 0;  // no vector registers for a variadic callee
  regs.orig_rax = static_cast<unsigned long long>(-1);  // no syscall restart on the way into the call
  unsigned long long* arg_regs[6] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
  for (size_t i = 0; i < args.size(); ++i) *arg_regs[i] = args[i];
  regs.eflags &= ~(kEflagsTrap | kEflagsDirection);
  return ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) == 0 ? 0 : errno;
}

// The thread is in an interrupt or signal-delivery stop, where the
// kernel's own syscall restart then applies.
void ThreadState::restore_in_place(pid_t tid) const {
  Registers& r = *r_;
  ::ptrace(PTRACE_SETREGS, tid, nullptr, &r.saved);
  if (!r.xstate.empty()) {
    iovec iov{r.xstate.data(), r.xstate.size()};
    ::ptrace(PTRACE_SETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov);
  } else {
    ::ptrace(PTRACE_SETFPREGS, tid, nullptr, &r.fpregs);
  }
  ::ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof r.sigmask), &r.sigmask);
}

}  // namespace ftjit::inject::detail
