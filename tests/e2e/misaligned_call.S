/* SPDX-License-Identifier: MIT */
/* int test_call_misaligned(int (*fn)(int, int), int a, int b)
 *
 * Calls fn(a, b) with the stack 8 bytes off the ABI's alignment, as GCC
 * does when it calls its own static functions that need no alignment
 * (-fipa-stack-alignment): a trampoline must not assume rsp = 8 mod 16 at
 * a traced entry.
 *
 *   push %rbx          rsp = 0 mod 16
 *   sub  $8, %rsp      rsp = 8 mod 16
 *   call *%rax         the callee sees rsp = 0 mod 16 (the ABI says 8) */
        .text
        .globl  test_call_misaligned
        .type   test_call_misaligned, @function
test_call_misaligned:
        pushq   %rbx
        movq    %rdi, %rax
        movl    %esi, %edi
        movl    %edx, %esi
        subq    $8, %rsp
        call    *%rax
        addq    $8, %rsp
        popq    %rbx
        ret
        .size   test_call_misaligned, .-test_call_misaligned
        .section .note.GNU-stack,"",@progbits
