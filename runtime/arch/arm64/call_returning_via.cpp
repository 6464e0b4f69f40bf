// SPDX-License-Identifier: MIT
// arm64's half of arch.h's dlopen-caller call. `ret` returns to x30, so a
// lone `ret` cannot bring the call back; crtn's epilogue of _init/_fini can:
//
//     ldp x29, x30, [sp], #16     ; a8c17bfd   the gadget: pops a frame
//     ret                         ; d65f03c0   and returns to its x30
//
// ftjit_call_returning_via pushes the frame the gadget pops (x29, 1f), sets
// x30 to the gadget and branches to the function:
//
//     sp ->  [ x29          ]  popped by the gadget
//            [ 1f           ]  ... its x30: back here
//     x29 -> [ caller's x29 ]  our own frame record
//            [ caller's x30 ]
#include "runtime/arch/arch.h"

namespace ftjit::arch {

const void* find_return_gadget(const uint8_t* code) {
  constexpr uint32_t kLdpX29X30PostIndex16 = 0xa8c17bfd;  // ldp x29, x30, [sp], #16
  constexpr uint32_t kRet = 0xd65f03c0;                   // ret
  // crti/crtn's _init: (bti c), stp, mov, bl, ldp, ret; _fini without bl.
  constexpr size_t kWords = 8;
  for (size_t i = 0; i + 1 < kWords; ++i) {
    uint32_t w[2];
    std::memcpy(w, code + 4 * i, sizeof w);
    if (w[0] == kLdpX29X30PostIndex16 && w[1] == kRet) return code + 4 * i;
  }
  return nullptr;
}

}  // namespace ftjit::arch

// fn in x0, a0..a2 in x1..x3, the gadget in x4. x16: the branch register a
// `bti c` landing pad accepts from `br`.
asm(R"(
  .text
  .p2align 2
  .globl ftjit_call_returning_via
  .hidden ftjit_call_returning_via
  .type ftjit_call_returning_via, %function
ftjit_call_returning_via:
  .cfi_startproc
  stp x29, x30, [sp, #-16]!
  .cfi_def_cfa_offset 16
  .cfi_offset 29, -16
  .cfi_offset 30, -8
  mov x29, sp
  .cfi_def_cfa_register 29
  adr x9, 1f
  stp x29, x9, [sp, #-16]!
  mov x16, x0
  mov x0, x1
  mov x1, x2
  mov x2, x3
  mov x30, x4
  br x16
1:
  ldp x29, x30, [sp], #16
  .cfi_def_cfa sp, 0
  .cfi_restore 29
  .cfi_restore 30
  ret
  .cfi_endproc
  .size ftjit_call_returning_via, .-ftjit_call_returning_via
)");
