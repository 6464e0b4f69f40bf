// SPDX-License-Identifier: MIT
// A caller-supplied ("direct") trampoline for the riscv64 engine tests. It
// is entered as a site's stub enters any trampoline (the engine's shared
// trampolines enter it the same way when other ops share the site):
//
//     t0 = the site's entry + 8    where the function goes on
//     ra = the function's return address, untouched
//     t1 = this trampoline's address (the stub's, or seed 003's register)
//
// It counts its calls in test_direct_calls (tests/common/engine_test.cpp;
// not atomically: the tests that use it call from one thread) and goes on
// into the function. It touches no argument register.
        .text
        .globl  test_direct_trampoline
        .type   test_direct_trampoline, %function
        .p2align 3
test_direct_trampoline:
        lla     t1, test_direct_calls
        ld      t3, 0(t1)
        addi    t3, t3, 1
        sd      t3, 0(t1)
        jr      t0
        .size   test_direct_trampoline, .-test_direct_trampoline

        .section .note.GNU-stack,"",@progbits
