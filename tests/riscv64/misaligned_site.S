// SPDX-License-Identifier: MIT
// A riscv64 function whose sled is not 8-byte aligned (what =8,4 gives
// without -falign-functions=8 for about three functions in four): its
// literal and its stub word could not be stored atomically, so an attach
// must be refused in one line, naming the flags, with nothing patched.
//
//   8k+0   c.nop                  filler
//   8k+2   c.nop x4               the literal: misaligned
//   8k+10  rv_misaligned: c.nop x4, then x * 7 + 1
        .option push
        .option rvc
        .text
        .p2align 3
        c.nop
.Lrecord:
        c.nop
        c.nop
        c.nop
        c.nop
        .globl  rv_misaligned
        .type   rv_misaligned, %function
rv_misaligned:
        c.nop
        c.nop
        c.nop
        c.nop
        slli    t1, a0, 3
        sub     a0, t1, a0
        addi    a0, a0, 1
        ret
        .size   rv_misaligned, .-rv_misaligned
        .option pop

        .section __patchable_function_entries,"aw",@progbits
        .p2align 3
        .quad   .Lrecord
        .section .note.GNU-stack,"",@progbits
