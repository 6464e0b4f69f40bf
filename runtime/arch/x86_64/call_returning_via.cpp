// SPDX-License-Identifier: MIT
// x86-64's half of arch.h's dlopen-caller call: the return gadget is one
// `ret` byte of the caller's crti _init/_fini; ftjit_call_returning_via
// pushes its own continuation, then the gadget, and jumps to the function,
// whose `ret` lands on the gadget, whose `ret` lands back here:
//
//     rsp ->  [ gadget       ]  fn's return address: inside the caller
//             [ 1f           ]  the gadget's `ret` comes back here
//             [ (alignment)  ]  rsp % 16 == 8 at fn's entry, as after a call
//     rbp ->  [ saved rbp    ]
//             [ our return   ]
#include "runtime/arch/arch.h"

namespace ftjit::arch {

const void* find_return_gadget(const uint8_t* code) {
  constexpr uint8_t kRet = 0xc3;  // ret
  // crti's _init/_fini: a few instructions, then `ret`; never a site.
  for (size_t i = 0; i < 24; ++i) {
    if (code[i] == kRet) return code + i;
  }
  return nullptr;
}

}  // namespace ftjit::arch

// fn in rdi, a0..a2 in rsi rdx rcx, the gadget in r8.
asm(R"(
  .text
  .p2align 4
  .globl ftjit_call_returning_via
  .hidden ftjit_call_returning_via
  .type ftjit_call_returning_via, @function
ftjit_call_returning_via:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  subq $8, %rsp
  leaq 1f(%rip), %rax
  pushq %rax
  pushq %r8
  movq %rdi, %r11
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  jmpq *%r11
1:
  leave
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size ftjit_call_returning_via, .-ftjit_call_returning_via
)");
