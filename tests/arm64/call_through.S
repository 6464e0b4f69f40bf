// SPDX-License-Identifier: MIT
// a64_call_through: calls the function in a64_call_target with x0-x7 and
// v0-v7 as they came (so the harness knows the traced function's parent_ip
// exactly: a64_call_return), and checks that x19-x28, which AAPCS64 makes
// callee-saved, and x18, which no trampoline may write, come back as they
// were: a64_callee_saved_broken is set to 1 otherwise.
//
// a64_direct_trampoline: what a plugin's direct trampoline does at the
// least: entered as a site's bl would enter it (x30 = start+8, x9 = the
// parent's return address), counts a64_direct_calls and returns into the
// function with x30 = the parent's return address again.
        .text
        .global a64_call_through
        .global a64_call_return
        .global a64_direct_trampoline
        .type   a64_call_through, %function
a64_call_through:
        stp     x29, x30, [sp, #-96]!
        mov     x29, sp
        stp     x19, x20, [sp, #16]
        stp     x21, x22, [sp, #32]
        stp     x23, x24, [sp, #48]
        stp     x25, x26, [sp, #64]
        stp     x27, x28, [sp, #80]
        movz    x19, #0x1919
        movz    x20, #0x2020
        movz    x21, #0x2121
        movz    x22, #0x2222
        movz    x23, #0x2323
        movz    x24, #0x2424
        movz    x25, #0x2525
        movz    x26, #0x2626
        movz    x27, #0x2727
        movz    x28, #0x2828
        mov     x17, x18
        str     x17, [sp, #-16]!
        mov     x17, sp                 // the traced function's entry sp
        adrp    x16, a64_call_sp
        str     x17, [x16, :lo12:a64_call_sp]
        adrp    x16, a64_call_target
        ldr     x16, [x16, :lo12:a64_call_target]
        blr     x16
a64_call_return:
        ldr     x17, [sp], #16
        adrp    x16, a64_callee_saved_broken
        add     x16, x16, :lo12:a64_callee_saved_broken
        cmp     x17, x18
        b.ne    1f
        movz    x17, #0x1919
        cmp     x19, x17
        b.ne    1f
        movz    x17, #0x2020
        cmp     x20, x17
        b.ne    1f
        movz    x17, #0x2121
        cmp     x21, x17
        b.ne    1f
        movz    x17, #0x2222
        cmp     x22, x17
        b.ne    1f
        movz    x17, #0x2323
        cmp     x23, x17
        b.ne    1f
        movz    x17, #0x2424
        cmp     x24, x17
        b.ne    1f
        movz    x17, #0x2525
        cmp     x25, x17
        b.ne    1f
        movz    x17, #0x2626
        cmp     x26, x17
        b.ne    1f
        movz    x17, #0x2727
        cmp     x27, x17
        b.ne    1f
        movz    x17, #0x2828
        cmp     x28, x17
        b.ne    1f
        b       2f
1:      mov     x17, #1
        str     x17, [x16]
2:
        ldp     x19, x20, [sp, #16]
        ldp     x21, x22, [sp, #32]
        ldp     x23, x24, [sp, #48]
        ldp     x25, x26, [sp, #64]
        ldp     x27, x28, [sp, #80]
        ldp     x29, x30, [sp], #96
        ret
        .size   a64_call_through, . - a64_call_through

        .type   a64_direct_trampoline, %function
a64_direct_trampoline:
        adrp    x16, a64_direct_calls
        add     x16, x16, :lo12:a64_direct_calls
        ldr     x17, [x16]
        add     x17, x17, #1
        str     x17, [x16]
        mov     x16, x30
        mov     x30, x9
        ret     x16
        .size   a64_direct_trampoline, . - a64_direct_trampoline

        .data
        .balign 8
        .global a64_call_target
        .global a64_callee_saved_broken
        .global a64_direct_calls
        .global a64_call_sp
a64_call_sp:              .quad 0
a64_call_target:          .quad 0
a64_callee_saved_broken:  .quad 0
a64_direct_calls:         .quad 0
        .section .note.GNU-stack,"",%progbits
