/* SPDX-License-Identifier: MIT */
/* Caller-supplied trampolines for the bench's FTJIT_STRATEGY_DIRECT rows,
 * riscv64 (the x86-64 ones: bench/x86_64/direct_tramp.S; same contracts).
 *
 * bench_target.c is built with -fpatchable-function-entry=8,4
 * -falign-functions=8: an 8-byte literal before the entry, then
 *
 *   entry:    auipc t0, hi        (written once at init)
 *   entry+4:  jalr t0, lo(t0)     t0 = entry+8, where the function goes on
 *
 * which calls the site's stub, which jumps here through t1 (the engine's
 * own trampolines enter a direct one the same way when other ops share
 * the site: riscv64_emitter.cpp, to_direct). So on entry here:
 *
 *   t0 = entry + 8; ra = the parent's return address; t1 = our address;
 *   sp = the traced function's sp at its entry;
 *   a0-a7, fa0-fa7, t2 (GCC's static chain): the function's live
 *   arguments; they must reach it unchanged.
 *
 * Every trampoline goes on into the function with `jr t0`. t1, t3-t6 are
 * free at any call. The counters are not updated atomically: the calls
 * section is single-threaded, and an amoadd would be a few ns on a row
 * that exists to measure a few ns. */

	.text

	.p2align 3
	.globl ftjit_bench_direct_tramp
	.hidden ftjit_bench_direct_tramp
	.type ftjit_bench_direct_tramp, %function
/* Attached to bench_leaf: counts relevant hits. */
ftjit_bench_direct_tramp:
	lla t1, ftjit_bench_direct_hits
	ld t3, 0(t1)
	addi t3, t3, 1
	sd t3, 0(t1)
	jr t0
	.size ftjit_bench_direct_tramp, .-ftjit_bench_direct_tramp

	.p2align 3
	.globl ftjit_bench_direct_tramp_irrelevant
	.hidden ftjit_bench_direct_tramp_irrelevant
	.type ftjit_bench_direct_tramp_irrelevant, %function
/* Attached to bench_other_<k>: must stay at zero during the calls loop. */
ftjit_bench_direct_tramp_irrelevant:
	lla t1, ftjit_bench_direct_irrelevant_hits
	ld t3, 0(t1)
	addi t3, t3, 1
	sd t3, 0(t1)
	jr t0
	.size ftjit_bench_direct_tramp_irrelevant, .-ftjit_bench_direct_tramp_irrelevant

	.p2align 3
	.globl ftjit_bench_direct_tramp_c
	.hidden ftjit_bench_direct_tramp_c
	.type ftjit_bench_direct_tramp_c, %function
/* The floor of every trampoline that calls C: one call to a C function
 * that counts (ftjit_bench_count_direct_hit), keeping only what bench_leaf
 * needs (a0) and what the return needs (t0 = entry+8, ra = the parent's
 * return address, both clobbered by a call). A real trampoline must keep
 * every argument register and pass ip, parent_ip, ops and regs: whatever
 * it costs beyond this row is what that costs.
 *
 *   sp+16     t0 (entry + 8), (padding: sp stays 16-aligned)
 *   sp+0      a0, ra */
ftjit_bench_direct_tramp_c:
	addi sp, sp, -32
	sd a0, 0(sp)
	sd ra, 8(sp)
	sd t0, 16(sp)
	call ftjit_bench_count_direct_hit
	ld a0, 0(sp)
	ld ra, 8(sp)
	ld t0, 16(sp)
	addi sp, sp, 32
	jr t0
	.size ftjit_bench_direct_tramp_c, .-ftjit_bench_direct_tramp_c

	.p2align 3
	.globl ftjit_bench_direct_tramp_abi
	.hidden ftjit_bench_direct_tramp_abi
	.type ftjit_bench_direct_tramp_abi, %function
/* The floor of the callback ABI: what every ftjit trampoline must do for
 * ftjit_func_t and nothing more. It keeps what the engine's riscv64
 * trampolines keep of the integer registers (backends/riscv64/
 * riscv64_emitter.cpp, (c)): a0-a7 and t2-t6; fills ftjit_regs' arg[] and
 * sp; builds one frame record (s0 and our return, entry+8) so the
 * callback's frames chain to ours; and calls the bench's counting callback
 * (the one the generated rows call) with ip = entry, parent_ip = ra,
 * ftjit_bench_abi_ops and regs. Not kept: fa0-fa7 (which the engine's
 * riscv64 trampolines keep always). Left out on purpose, to price them:
 * the reentrancy guard and the per-thread entry/exit counts that tell the
 * engine when a trampoline is no longer in use and may be freed, and the
 * engine's second frame record (the one an unwinder sees the traced
 * function in).
 *
 *   sp+160 = S  (the traced function's sp at entry)
 *   sp+144     s0, t0 (= entry + 8): the frame record; s0 = S
 *   sp+128     ra (parent return address), (padding)
 *   sp+80      t2 t3 t4 t5 t6
 *   sp+72      regs.sp = S
 *   sp+64      regs.direct (not written: engine-internal)
 *   sp+0       regs.arg[0..7] = a0..a7 */
ftjit_bench_direct_tramp_abi:
	addi sp, sp, -160
	sd a0, 0(sp)
	sd a1, 8(sp)
	sd a2, 16(sp)
	sd a3, 24(sp)
	sd a4, 32(sp)
	sd a5, 40(sp)
	sd a6, 48(sp)
	sd a7, 56(sp)
	sd t2, 80(sp)
	sd t3, 88(sp)
	sd t4, 96(sp)
	sd t5, 104(sp)
	sd t6, 112(sp)
	sd ra, 128(sp)
	sd s0, 144(sp)
	sd t0, 152(sp)
	addi s0, sp, 160
	sd s0, 72(sp)
	addi a0, t0, -8			/* ip: the entry, where the sled's auipc is */
	mv a1, ra			/* parent_ip */
	lla a2, ftjit_bench_abi_ops
	ld a2, 0(a2)
	mv a3, sp			/* regs */
	call ftjit_bench_count_entry
	ld a0, 0(sp)
	ld a1, 8(sp)
	ld a2, 16(sp)
	ld a3, 24(sp)
	ld a4, 32(sp)
	ld a5, 40(sp)
	ld a6, 48(sp)
	ld a7, 56(sp)
	ld t2, 80(sp)
	ld t3, 88(sp)
	ld t4, 96(sp)
	ld t5, 104(sp)
	ld t6, 112(sp)
	ld ra, 128(sp)
	ld s0, 144(sp)
	ld t0, 152(sp)
	addi sp, sp, 160
	jr t0
	.size ftjit_bench_direct_tramp_abi, .-ftjit_bench_direct_tramp_abi

	.bss
	.p2align 6		/* own cache line: not shared with the callbacks'
				   counters */
	.globl ftjit_bench_direct_hits
	.hidden ftjit_bench_direct_hits
	.type ftjit_bench_direct_hits, %object
ftjit_bench_direct_hits:
	.zero 8
	.size ftjit_bench_direct_hits, 8
	.globl ftjit_bench_direct_irrelevant_hits
	.hidden ftjit_bench_direct_irrelevant_hits
	.type ftjit_bench_direct_irrelevant_hits, %object
ftjit_bench_direct_irrelevant_hits:
	.zero 8
	.size ftjit_bench_direct_irrelevant_hits, 8

	.section .note.GNU-stack,"",%progbits
