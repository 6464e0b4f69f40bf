// SPDX-License-Identifier: MIT
// cli/inject/injector_isa.h for arm64 (AArch64) processes.
#include "cli/inject/injector_isa.h"

#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

#include "cli/inject/inject_internal.h"
#include "cli/inject/target_libc.h"

namespace ftjit::inject::detail {

const InjectorIsa& injector_isa() {
  // glibc has no __restore_rt on arm64 (it never sets SA_RESTORER): the
  // kernel returns every signal handler through the vDSO's trampoline.
  static const InjectorIsa kArm64{Isa::kArm64, EM_AARCH64, "arm64", "ld-linux-aarch64.so.1",
                                  SignalTrampoline::kVdso, /*red_zone=*/0};
  return kArm64;
}

std::span<const uint8_t> restore_rt_code() {
  // The vDSO's __kernel_rt_sigreturn (arch/arm64/kernel/vdso/sigreturn.S):
  //   68 11 80 d2    mov x8, #139     (__NR_rt_sigreturn)
  //   01 00 00 d4    svc #0
  static constexpr std::array<uint8_t, 8> kKernelRtSigreturn = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
  return kKernelRtSigreturn;
}

Result<StoppedRegisters> read_stopped_registers(pid_t tid) {
  user_regs_struct regs{};  // == the kernel's struct user_pt_regs
  iovec iov{&regs, sizeof regs};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &iov) != 0)
    return make_error(FTJIT_E_SYSTEM, errno_message("PTRACE_GETREGSET of thread " + std::to_string(tid), errno));
  StoppedRegisters out;
  out.pc = regs.pc;
  out.general.assign(std::begin(regs.regs), std::end(regs.regs));  // x0..x30 (x30: the link register)
  out.general.push_back(regs.sp);
  return out;
}

namespace {

uint32_t insn_at(const std::vector<uint8_t>& code, size_t i) {
  uint32_t insn;
  std::memcpy(&insn, code.data() + 4 * i, 4);
  return insn;
}

}  // namespace

std::optional<int64_t> errno_tpoff_from_code(pid_t pid, uint64_t errno_location) {
  // glibc 2.36's __errno_location (initial-exec TLS through the GOT):
  //   90000bc0   adrp x0, GOT page
  //   f946e000   ldr  x0, [x0, #:got_lo12:errno]     errno's TP offset
  //   d53bd041   mrs  x1, tpidr_el0
  //   8b000020   add  x0, x1, x0
  //   d65f03c0   ret
  // The mrs may come first and other registers may be used; a leading
  // `bti c` (any HINT: nop, bti, paciasp) of a branch-protected build is
  // skipped. Anything else: nullopt.
  constexpr size_t kInsns = 8;
  auto code = read_target_memory(pid, errno_location, 4 * kInsns);
  if (!code) return std::nullopt;
  int adrp_reg = -1, got_reg = -1, tp_reg = -1;
  uint64_t page = 0, got = 0;
  for (size_t i = 0; i < kInsns; ++i) {
    const uint32_t insn = insn_at(*code, i);
    const uint64_t pc = errno_location + 4 * i;
    if ((insn & 0xfffff01fu) == 0xd503201fu) {  // HINT #n
      if (adrp_reg >= 0 || tp_reg >= 0) return std::nullopt;  // only before the body
      continue;
    }
    if ((insn & 0x9f000000u) == 0x90000000u) {  // ADRP Xd, label
      if (adrp_reg >= 0 || tp_reg == static_cast<int>(insn & 31)) return std::nullopt;
      const uint64_t immlo = (insn >> 29) & 3, immhi = (insn >> 5) & 0x7ffff;
      int64_t imm = static_cast<int64_t>((immhi << 2) | immlo);
      if (imm & (int64_t{1} << 20)) imm -= int64_t{1} << 21;  // 21-bit signed, in pages
      adrp_reg = static_cast<int>(insn & 31);
      page = (pc & ~uint64_t{0xfff}) + static_cast<uint64_t>(imm * 4096);
      continue;
    }
    if ((insn & 0xffc00000u) == 0xf9400000u) {  // LDR Xt, [Xn, #imm12 * 8]
      if (adrp_reg < 0 || got_reg >= 0 || static_cast<int>((insn >> 5) & 31) != adrp_reg ||
          tp_reg == static_cast<int>(insn & 31))
        return std::nullopt;
      got_reg = static_cast<int>(insn & 31);
      got = page + ((insn >> 10) & 0xfff) * 8;
      continue;
    }
    if ((insn & 0xffffffe0u) == 0xd53bd040u) {  // MRS Xt, TPIDR_EL0
      if (tp_reg >= 0) return std::nullopt;
      tp_reg = static_cast<int>(insn & 31);
      if (tp_reg == got_reg || (got_reg < 0 && tp_reg == adrp_reg)) return std::nullopt;  // clobbers it
      continue;
    }
    if ((insn & 0xffe0fc00u) == 0x8b000000u) {  // ADD Xd, Xn, Xm (no shift)
      const int rd = static_cast<int>(insn & 31), rn = static_cast<int>((insn >> 5) & 31),
                rm = static_cast<int>((insn >> 16) & 31);
      if (got_reg < 0 || tp_reg < 0 || got_reg == tp_reg || rd != 0) return std::nullopt;
      if (!((rn == tp_reg && rm == got_reg) || (rn == got_reg && rm == tp_reg))) return std::nullopt;
      if (i + 1 >= kInsns || insn_at(*code, i + 1) != 0xd65f03c0u) return std::nullopt;  // RET
      auto word = read_target_memory(pid, got, 8);
      if (!word) return std::nullopt;
      int64_t errno_tpoff;
      std::memcpy(&errno_tpoff, word->data(), 8);
      return errno_tpoff;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace ftjit::inject::detail
