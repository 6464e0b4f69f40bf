/* SPDX-License-Identifier: MIT */
/* The floor under any exit hook done by return-address replacement,
 * riscv64 (the x86-64 one: bench/x86_64/ra_floor.S): a leaf with
 * bench_leaf's body that replaces its own return address (ra) with a stub
 * which jumps to the real one. No callback, no shadow stack: what is left
 * is the CPU's cost of a `ret` whose target is not the one its
 * return-address stack predicted. Single-threaded use only (one saved
 * address).
 *
 *   ftjit_bench_ra_floor:
 *     lla t1, saved ; sd ra, 0(t1)          real return address
 *     lla ra, stub                          replaced
 *     x * 3 + 1 (32-bit, as bench_leaf)
 *     ret                                   -> stub (mispredicted)
 *   stub:
 *     lla t1, saved ; ld t1, 0(t1)
 *     jr t1                                 -> real return address */
        .text
        .globl  ftjit_bench_ra_floor
        .type   ftjit_bench_ra_floor, %function
        .p2align 4
ftjit_bench_ra_floor:
        lla     t1, ra_floor_saved
        sd      ra, 0(t1)
        lla     ra, ra_floor_stub
        slliw   t1, a0, 1
        addw    a0, a0, t1
        addiw   a0, a0, 1
        ret
        .size   ftjit_bench_ra_floor, .-ftjit_bench_ra_floor

        .p2align 4
ra_floor_stub:
        lla     t1, ra_floor_saved
        ld      t1, 0(t1)
        jr      t1

        .bss
        .p2align 3
ra_floor_saved:
        .quad   0
        .section .note.GNU-stack,"",%progbits
