// SPDX-License-Identifier: MIT
// A caller-supplied ("direct") trampoline for the arm64 engine tests. It is
// entered as a site's `bl` enters any trampoline (the engine's shared
// trampolines enter it the same way when other ops share the site):
//
//     x30 = the site's start + 8   where the function goes on
//     x9  = the function's return address (the sled's `mov x9, x30`)
//
// It counts its calls in test_direct_calls (tests/common/engine_test.cpp;
// not atomically: the tests that use it call from one thread) and goes on
// into the function with x30 given back. It touches no argument register:
// x16/x17 (IP0/IP1) are free at any call.
        .text
        .globl  test_direct_trampoline
        .type   test_direct_trampoline, %function
        .p2align 3
test_direct_trampoline:
        adrp    x16, test_direct_calls
        add     x16, x16, :lo12:test_direct_calls
        ldr     x17, [x16]
        add     x17, x17, #1
        str     x17, [x16]
        mov     x16, x30
        mov     x30, x9
        br      x16
        .size   test_direct_trampoline, .-test_direct_trampoline

        .section .note.GNU-stack,"",@progbits
