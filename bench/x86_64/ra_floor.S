/* SPDX-License-Identifier: MIT */
/* The floor under any exit hook done by return-address replacement: a leaf
 * with bench_leaf's body that replaces its own return address with a stub
 * which jumps to the real one. No callback, no shadow stack: what is left
 * is the CPU's cost of a `ret` whose target is not the one its return stack
 * buffer predicted. Single-threaded use only (one saved address).
 *
 *   ftjit_bench_ra_floor:
 *     mov  (%rsp), %r10          real return address
 *     mov  %r10, saved
 *     lea  stub, %r11
 *     mov  %r11, (%rsp)          replaced
 *     lea  1(%rdi,%rdi,2), %eax  x * 3 + 1
 *     ret                        -> stub (mispredicted)
 *   stub:
 *     jmp  *saved                -> real return address */
        .text
        .globl  ftjit_bench_ra_floor
        .type   ftjit_bench_ra_floor, @function
        .p2align 4
ftjit_bench_ra_floor:
        movq    (%rsp), %r10
        movq    %r10, ra_floor_saved(%rip)
        leaq    ra_floor_stub(%rip), %r11
        movq    %r11, (%rsp)
        leal    1(%rdi,%rdi,2), %eax
        ret
        .size   ftjit_bench_ra_floor, .-ftjit_bench_ra_floor

        .p2align 4
ra_floor_stub:
        jmp     *ra_floor_saved(%rip)

        .bss
        .p2align 3
ra_floor_saved:
        .quad   0
        .section .note.GNU-stack,"",@progbits
