/* SPDX-License-Identifier: MIT */
/* The floor under any exit hook done by return-address replacement, arm64
 * (the x86-64 one: bench/x86_64/ra_floor.S): a leaf with bench_leaf's body
 * that replaces its own return address (x30) with a stub which branches to
 * the real one. No callback, no shadow stack: what is left is the CPU's
 * cost of a `ret` whose target is not the one its return-address stack
 * predicted. Single-threaded use only (one saved address).
 *
 *   ftjit_bench_ra_floor:
 *     adrp x16, saved ; str x30, saved      real return address
 *     adr  x30, stub                        replaced
 *     add  w0, w0, w0, lsl #1 ; add #1      x * 3 + 1
 *     ret                                   -> stub (mispredicted)
 *   stub:
 *     adrp x16, saved ; ldr x16, saved
 *     br   x16                              -> real return address */
        .text
        .globl  ftjit_bench_ra_floor
        .type   ftjit_bench_ra_floor, %function
        .p2align 4
ftjit_bench_ra_floor:
        adrp    x16, ra_floor_saved
        str     x30, [x16, :lo12:ra_floor_saved]
        adr     x30, ra_floor_stub
        add     w0, w0, w0, lsl #1
        add     w0, w0, #1
        ret
        .size   ftjit_bench_ra_floor, .-ftjit_bench_ra_floor

        .p2align 4
ra_floor_stub:
        adrp    x16, ra_floor_saved
        ldr     x16, [x16, :lo12:ra_floor_saved]
        br      x16

        .bss
        .p2align 3
ra_floor_saved:
        .quad   0
        .section .note.GNU-stack,"",%progbits
