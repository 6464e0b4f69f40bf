/* SPDX-License-Identifier: MIT */
/* Caller-supplied trampolines for the bench's FTJIT_STRATEGY_DIRECT rows,
 * arm64 (the x86-64 ones: bench/x86_64/direct_tramp.S; same contracts).
 *
 * bench_target.c is built with -fpatchable-function-entry=4,2
 * -falign-functions=8: an 8-byte literal before the entry, then
 *
 *   entry:    mov x9, x30        x9  = the function's real return address
 *   entry+4:  bl  <tramp>        x30 = entry+8, where the function goes on
 *
 * (the engine's own trampolines enter a direct one the same way when other
 * ops share the site: arm64_emitter.cpp, to_direct). So on entry here:
 *
 *   x30 = entry + 8; x9 = the parent's return address; sp = the traced
 *   function's sp at its entry;
 *   x0-x7, x8 (indirect result), v0-v7, x18 (GCC's static chain): the
 *   function's live arguments; they must reach it unchanged.
 *
 * Every trampoline goes on into the function with x30 given back:
 *
 *   mov x16, x30 ; mov x30, x9 ; br x16
 *
 * x16/x17 (IP0/IP1) and the flags are free at any call. The counters are
 * not updated atomically: the calls section is single-threaded, and an
 * ldxr/stxr loop would dominate the few ns this row exists to measure.
 * `bti c` (a hint, a NOP without BTI) plays endbr64's part: br x16 from
 * the engine's trampolines may reach us under BTI too. */

	.text

	.p2align 3
	.globl ftjit_bench_direct_tramp
	.hidden ftjit_bench_direct_tramp
	.type ftjit_bench_direct_tramp, %function
/* Attached to bench_leaf: counts relevant hits. */
ftjit_bench_direct_tramp:
	hint #34		/* bti c */
	adrp x16, ftjit_bench_direct_hits
	ldr x17, [x16, :lo12:ftjit_bench_direct_hits]
	add x17, x17, #1
	str x17, [x16, :lo12:ftjit_bench_direct_hits]
	mov x16, x30
	mov x30, x9
	br x16
	.size ftjit_bench_direct_tramp, .-ftjit_bench_direct_tramp

	.p2align 3
	.globl ftjit_bench_direct_tramp_irrelevant
	.hidden ftjit_bench_direct_tramp_irrelevant
	.type ftjit_bench_direct_tramp_irrelevant, %function
/* Attached to bench_other_<k>: must stay at zero during the calls loop. */
ftjit_bench_direct_tramp_irrelevant:
	hint #34
	adrp x16, ftjit_bench_direct_irrelevant_hits
	ldr x17, [x16, :lo12:ftjit_bench_direct_irrelevant_hits]
	add x17, x17, #1
	str x17, [x16, :lo12:ftjit_bench_direct_irrelevant_hits]
	mov x16, x30
	mov x30, x9
	br x16
	.size ftjit_bench_direct_tramp_irrelevant, .-ftjit_bench_direct_tramp_irrelevant

	.p2align 3
	.globl ftjit_bench_direct_tramp_c
	.hidden ftjit_bench_direct_tramp_c
	.type ftjit_bench_direct_tramp_c, %function
/* The floor of every trampoline that calls C: one call to a C function
 * that counts (ftjit_bench_count_direct_hit), keeping only what bench_leaf
 * needs (x0) and what the return needs (x30 = entry+8, x9 = the parent's
 * return address, both clobbered by a call). A real trampoline must keep
 * every argument register and pass ip, parent_ip, ops and regs: whatever
 * it costs beyond this row is what that costs.
 *
 *   sp+16     x30 (entry + 8), (padding: sp stays 16-aligned)
 *   sp+0      x0, x9 */
ftjit_bench_direct_tramp_c:
	hint #34
	stp x0, x9, [sp, #-32]!
	str x30, [sp, #16]
	bl ftjit_bench_count_direct_hit
	ldp x0, x9, [sp]
	ldr x30, [sp, #16]
	add sp, sp, #32
	mov x16, x30
	mov x30, x9
	br x16
	.size ftjit_bench_direct_tramp_c, .-ftjit_bench_direct_tramp_c

	.p2align 3
	.globl ftjit_bench_direct_tramp_abi
	.hidden ftjit_bench_direct_tramp_abi
	.type ftjit_bench_direct_tramp_abi, %function
/* The floor of the callback ABI: what every ftjit trampoline must do for
 * ftjit_func_t and nothing more. It keeps what the engine's arm64
 * trampolines keep (backends/arm64/arm64_emitter.cpp, (c)): x0-x8, x10-x15
 * (what an -fipa-ra caller might keep) and x18; fills ftjit_regs' arg[]
 * and sp; builds one frame record (x29, x30) so the callback's frames
 * chain to ours; and calls the bench's counting callback (the one the
 * generated rows call) with ip = entry, parent_ip = x9,
 * ftjit_bench_abi_ops and regs. Not kept: v0-v7 (as with
 * FTJIT_OPS_F_NO_FP). Left out on purpose, to price them: the reentrancy
 * guard and the per-thread entry/exit counts that tell the engine when a
 * trampoline is no longer in use and may be freed, and the engine's second
 * frame record (the one an unwinder sees the traced function in).
 *
 *   sp+176 = S  (the traced function's sp at entry)
 *   sp+160     x9 (parent return address), (padding)
 *   sp+144     x29, x30 (= entry + 8): the frame record; x29 = sp+144
 *   sp+80      x8 x10 x11 x12 x13 x14 x15 x18
 *   sp+72      regs.sp = S
 *   sp+64      regs.direct (not written: engine-internal)
 *   sp+0       regs.arg[0..7] = x0..x7 */
ftjit_bench_direct_tramp_abi:
	hint #34
	sub sp, sp, #176
	stp x0, x1, [sp, #0]
	stp x2, x3, [sp, #16]
	stp x4, x5, [sp, #32]
	stp x6, x7, [sp, #48]
	stp x8, x10, [sp, #80]
	stp x11, x12, [sp, #96]
	stp x13, x14, [sp, #112]
	stp x15, x18, [sp, #128]
	stp x29, x30, [sp, #144]
	add x29, sp, #144
	str x9, [sp, #160]
	add x10, sp, #176
	str x10, [sp, #72]
	sub x0, x30, #8			/* ip: the entry, where the sled's mov is */
	mov x1, x9			/* parent_ip */
	adrp x2, ftjit_bench_abi_ops
	ldr x2, [x2, :lo12:ftjit_bench_abi_ops]
	mov x3, sp			/* regs */
	bl ftjit_bench_count_entry
	ldp x0, x1, [sp, #0]
	ldp x2, x3, [sp, #16]
	ldp x4, x5, [sp, #32]
	ldp x6, x7, [sp, #48]
	ldp x8, x10, [sp, #80]
	ldp x11, x12, [sp, #96]
	ldp x13, x14, [sp, #112]
	ldp x15, x18, [sp, #128]
	ldp x29, x30, [sp, #144]
	ldr x9, [sp, #160]
	add sp, sp, #176
	mov x16, x30
	mov x30, x9
	br x16
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
