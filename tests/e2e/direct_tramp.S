// SPDX-License-Identifier: MIT
// A caller-supplied ("direct") trampoline for the tests: counts its calls
// and returns into the traced function, touching no argument register.
        .text
        .globl  test_direct_trampoline
        .type   test_direct_trampoline, @function
        .p2align 4
test_direct_trampoline:
        lock incq test_direct_calls(%rip)
        ret
        .size   test_direct_trampoline, .-test_direct_trampoline

        .data
        .globl  test_direct_calls
        .p2align 3
test_direct_calls:
        .quad   0
        .section .note.GNU-stack,"",@progbits
