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

	.p2align 4
	.globl ftjit_bench_direct_tramp_abi
	.hidden ftjit_bench_direct_tramp_abi
	.type ftjit_bench_direct_tramp_abi, @function
/* The floor of the callback ABI: what every ftjit trampoline must do for
 * ftjit_func_t and nothing more. It keeps every argument register and r11
 * (GCC's -fipa-ra), fills ftjit_regs' arg[] and sp, and calls the bench's
 * counting callback (the one the generated rows call) with ip, parent_ip,
 * ftjit_bench_abi_ops and regs. Not kept: xmm (as with FTJIT_OPS_F_NO_FP).
 * Left out on purpose, to price them: the reentrancy guard and the
 * per-thread entry/exit counts that tell the engine when a trampoline is
 * no longer in use and may be freed.
 *
 *   rsp+104 -> parent return address            -> parent_ip
 *   rsp+96  -> return address into bench_leaf     -> ip = it - 5
 *   rsp+88     (padding: rsp stays 16-aligned for the call)
 *   rsp+80     r11
 *   rsp+72     regs.sp   (the traced function's stack pointer at entry)
 *   rsp+64     regs.direct (not written: engine-internal)
 *   rsp+0      regs.arg[0..7] = rdi rsi rdx rcx r8 r9 rax r10 */
ftjit_bench_direct_tramp_abi:
	endbr64
	sub $96, %rsp
	mov %rdi, 0(%rsp)
	mov %rsi, 8(%rsp)
	mov %rdx, 16(%rsp)
	mov %rcx, 24(%rsp)
	mov %r8, 32(%rsp)
	mov %r9, 40(%rsp)
	mov %rax, 48(%rsp)
	mov %r10, 56(%rsp)
	mov %r11, 80(%rsp)
	lea 104(%rsp), %rcx
	mov %rcx, 72(%rsp)
	mov 96(%rsp), %rdi
	sub $5, %rdi
	mov 104(%rsp), %rsi
	mov ftjit_bench_abi_ops(%rip), %rdx
	mov %rsp, %rcx
	call ftjit_bench_count_entry
	mov 0(%rsp), %rdi
	mov 8(%rsp), %rsi
	mov 16(%rsp), %rdx
	mov 24(%rsp), %rcx
	mov 32(%rsp), %r8
	mov 40(%rsp), %r9
	mov 48(%rsp), %rax
	mov 56(%rsp), %r10
	mov 80(%rsp), %r11
	add $96, %rsp
	ret
	.size ftjit_bench_direct_tramp_abi, .-ftjit_bench_direct_tramp_abi

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
