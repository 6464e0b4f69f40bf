/* SPDX-License-Identifier: MIT */
/* int test_call_keeping_registers(int (*fn)(int, int), uint64_t out[16])
 *
 * Calls fn(2, 3) the way GCC's -fipa-ra lets a caller call a function it
 * has seen: values live across the call in call-clobbered registers that
 * the callee (traced_add: lea (%rdi,%rsi),%eax) never writes. A tracer
 * must give every one of them back. After the call, out[] holds rcx rdx
 * rsi rdi r8 r9 r10 r11 and the low halves of xmm2..xmm6, xmm8, xmm12,
 * xmm15.
 *
 * Register values: 0x1100 + n for the GPRs (rdi and rsi keep the
 * arguments 2 and 3), 0x2200 + n for xmm n. */
        .text
        .globl  test_call_keeping_registers
        .type   test_call_keeping_registers, @function
test_call_keeping_registers:
        pushq   %rbx
        movq    %rsi, %rbx
        movq    %rdi, %rax
        movl    $2, %edi
        movl    $3, %esi
        movq    $0x1101, %rcx
        movq    $0x1102, %rdx
        movq    $0x1108, %r8
        movq    $0x1109, %r9
        movq    $0x110a, %r10
        movq    $0x2202, %r11
        movq    %r11, %xmm2
        movq    $0x2203, %r11
        movq    %r11, %xmm3
        movq    $0x2204, %r11
        movq    %r11, %xmm4
        movq    $0x2205, %r11
        movq    %r11, %xmm5
        movq    $0x2206, %r11
        movq    %r11, %xmm6
        movq    $0x2208, %r11
        movq    %r11, %xmm8
        movq    $0x220c, %r11
        movq    %r11, %xmm12
        movq    $0x220f, %r11
        movq    %r11, %xmm15
        movq    $0x110b, %r11
        call    *%rax
        movq    %rcx, 0(%rbx)
        movq    %rdx, 8(%rbx)
        movq    %rsi, 16(%rbx)
        movq    %rdi, 24(%rbx)
        movq    %r8, 32(%rbx)
        movq    %r9, 40(%rbx)
        movq    %r10, 48(%rbx)
        movq    %r11, 56(%rbx)
        movq    %xmm2, 64(%rbx)
        movq    %xmm3, 72(%rbx)
        movq    %xmm4, 80(%rbx)
        movq    %xmm5, 88(%rbx)
        movq    %xmm6, 96(%rbx)
        movq    %xmm8, 104(%rbx)
        movq    %xmm12, 112(%rbx)
        movq    %xmm15, 120(%rbx)
        popq    %rbx
        ret
        .size   test_call_keeping_registers, .-test_call_keeping_registers
        .section .note.GNU-stack,"",@progbits
