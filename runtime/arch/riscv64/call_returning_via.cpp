// SPDX-License-Identifier: MIT
// riscv64's half of arch.h's dlopen-caller call, and the code-write
// probe's two functions.
//
// glibc's riscv64 objects have no _init or _fini (no DT_INIT/DT_FINI: the
// port uses init and fini arrays only), so no object offers the return
// gadget of the other ISAs: find_return_gadget finds none, and the dlopen
// watch calls the real dlopen plainly (the caller's namespace and RUNPATH
// are then the agent's). ftjit_call_returning_via is still defined, for a
// gadget shaped like a crtn epilogue, should one be found:
//
//     ld ra, 8(sp) ; addi sp, sp, 16 ; ret
#include "runtime/arch/arch.h"

namespace ftjit::arch {

const void* find_return_gadget(const uint8_t*) { return nullptr; }

}  // namespace ftjit::arch

// fn in a0, a0..a2 in a1..a3, the gadget in a4.
//
//     sp+24  caller's ra      sp+8   1f: popped into ra by the gadget
//     sp+16  caller's s0      sp+0   (pad)
asm(R"(
  .text
  .p2align 2
  .globl ftjit_call_returning_via
  .hidden ftjit_call_returning_via
  .type ftjit_call_returning_via, %function
ftjit_call_returning_via:
  .cfi_startproc
  addi sp, sp, -32
  .cfi_def_cfa_offset 32
  sd ra, 24(sp)
  sd s0, 16(sp)
  .cfi_offset 1, -8
  .cfi_offset 8, -16
  lla t0, 1f
  sd t0, 8(sp)
  mv t1, a0
  mv a0, a1
  mv a1, a2
  mv a2, a3
  mv ra, a4
  jr t1
1:
  .cfi_def_cfa_offset 16
  ld ra, 8(sp)
  ld s0, 0(sp)
  addi sp, sp, 16
  .cfi_def_cfa_offset 0
  .cfi_restore 1
  .cfi_restore 8
  ret
  .cfi_endproc
  .size ftjit_call_returning_via, .-ftjit_call_returning_via

  .section .rodata
  .p2align 2
  .globl ftjit_riscv64_return_1
  .hidden ftjit_riscv64_return_1
  .globl ftjit_riscv64_return_2
  .hidden ftjit_riscv64_return_2
  .option push
  .option norvc
ftjit_riscv64_return_1:
  li a0, 1
  ret
ftjit_riscv64_return_2:
  li a0, 2
  ret
  .option pop
  .text
)");
