/* SPDX-License-Identifier: MIT */
/* Caller-supplied trampolines for the bench's FTJIT_STRATEGY_DIRECT rows.
 *
 * A patched site runs `call <tramp>` as the traced function's first
 * instruction, so on entry here:
 *
 *   rsp -> return address into the traced function (entry + 5)
 *   rdi rsi rdx rcx r8 r9 rax r10, xmm0-7: the traced function's live
 *   arguments; they must reach the function unchanged.
 *
 * Each trampoline only bumps its counter (flags are dead at a function
 * entry, so `incq` may clobber them) and returns. The increment is not
 * `lock`ed: the calls section is single-threaded, and a locked RMW would
 * dominate the few ns this row exists to measure. */

	.text

	.p2align 4
	.globl ftjit_bench_direct_tramp
	.hidden ftjit_bench_direct_tramp
	.type ftjit_bench_direct_tramp, @function
/* Attached to bench_leaf: counts relevant hits. */
ftjit_bench_direct_tramp:
	endbr64			/* harmless NOP without CET; lets the engine
				   reach us with an indirect jmp/call too */
	incq ftjit_bench_direct_hits(%rip)
	ret
	.size ftjit_bench_direct_tramp, .-ftjit_bench_direct_tramp

	.p2align 4
	.globl ftjit_bench_direct_tramp_irrelevant
	.hidden ftjit_bench_direct_tramp_irrelevant
	.type ftjit_bench_direct_tramp_irrelevant, @function
/* Attached to bench_other_<k>: must stay at zero during the calls loop. */
ftjit_bench_direct_tramp_irrelevant:
	endbr64
	incq ftjit_bench_direct_irrelevant_hits(%rip)
	ret
	.size ftjit_bench_direct_tramp_irrelevant, .-ftjit_bench_direct_tramp_irrelevant

	.p2align 4
	.globl ftjit_bench_direct_tramp_c
	.hidden ftjit_bench_direct_tramp_c
	.type ftjit_bench_direct_tramp_c, @function
/* The floor of every trampoline that calls C: one call to a C function
 * that counts (ftjit_bench_count_direct_hit), keeping only what bench_leaf
 * needs (rdi; the pushes keep the call 16-aligned). A real trampoline
 * must keep every argument register and pass ip, parent_ip, ops and regs:
 * whatever it costs beyond this row is what that costs.
 *
 *   rsp+16 -> return address into bench_leaf (entry + 5)
 *   rsp+8     rdi
 *   rsp       (padding) */
ftjit_bench_direct_tramp_c:
	endbr64
	push %rdi
	push %rdi
	call ftjit_bench_count_direct_hit
	pop %rdi
	pop %rdi
	ret
	.size ftjit_bench_direct_tramp_c, .-ftjit_bench_direct_tramp_c

	.bss
	.p2align 6		/* own cache line: not shared with the callbacks'
				   counters */
	.globl ftjit_bench_direct_hits
	.hidden ftjit_bench_direct_hits
	.type ftjit_bench_direct_hits, @object
ftjit_bench_direct_hits:
	.zero 8
	.size ftjit_bench_direct_hits, 8
	.globl ftjit_bench_direct_irrelevant_hits
	.hidden ftjit_bench_direct_irrelevant_hits
	.type ftjit_bench_direct_irrelevant_hits, @object
ftjit_bench_direct_irrelevant_hits:
	.zero 8
	.size ftjit_bench_direct_irrelevant_hits, 8

	.section .note.GNU-stack,"",@progbits
