// SPDX-License-Identifier: MIT
// cli/inject/injector_isa.h for x86-64 processes.
#include "cli/inject/injector_isa.h"

#include <elf.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "cli/inject/inject_internal.h"
#include "cli/inject/target_libc.h"

namespace ftjit::inject::detail {

const InjectorIsa& injector_isa() {
  static const InjectorIsa kX86_64{Isa::kX86_64, EM_X86_64, "x86-64", "ld-linux-x86-64.so.2",
                                   SignalTrampoline::kLibc, /*red_zone=*/128};
  return kX86_64;
}

std::span<const uint8_t> restore_rt_code() {
  // glibc's (and musl's) x86-64 signal return trampoline:
  //   48 c7 c0 0f 00 00 00    mov $15, %rax      (__NR_rt_sigreturn)
  //   0f 05                   syscall
  static constexpr std::array<uint8_t, 9> kRestoreRt = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                                        0x00, 0x00, 0x0f, 0x05};
  return kRestoreRt;
}

Result<StoppedRegisters> read_stopped_registers(pid_t tid) {
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGS of thread " + std::to_string(tid), errno));
  StoppedRegisters out;
  out.pc = regs.rip;
  out.general = {regs.rax, regs.rbx, regs.rcx, regs.rdx, regs.rsi, regs.rdi, regs.rbp, regs.r8,
                 regs.r9,  regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15};
  return out;
}

std::optional<int64_t> errno_tpoff_from_code(pid_t pid, uint64_t errno_location) {
  // __errno_location:  48 8b 05 <disp32>   mov disp(%rip), %rax  (errno's TP offset)
  //                    64 48 03 04 25 0..  add %fs:0, %rax
  auto code = read_target_memory(pid, errno_location, 16);
  if (!code || (*code)[0] != 0x48 || (*code)[1] != 0x8b || (*code)[2] != 0x05 || (*code)[7] != 0x64)
    return std::nullopt;
  int32_t disp;
  std::memcpy(&disp, code->data() + 3, 4);
  auto got = read_target_memory(pid, errno_location + 7 + static_cast<int64_t>(disp), 8);
  if (!got) return std::nullopt;
  int64_t errno_tpoff;
  std::memcpy(&errno_tpoff, got->data(), 8);
  return errno_tpoff;
}

}  // namespace ftjit::inject::detail
