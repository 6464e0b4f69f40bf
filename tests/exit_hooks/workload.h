/* SPDX-License-Identifier: MIT */
/* Shared by the exit-hook programs. Their own translation unit is built
 * with -fpatchable-function-entry, so every function in it is a site except
 * the ones marked UNTRACED (main). */
#ifndef FTJIT_TESTS_EXIT_HOOKS_WORKLOAD_H
#define FTJIT_TESTS_EXIT_HOOKS_WORKLOAD_H

/* Each call has to stay a real call for there to be a frame to hook. The
 * alignment gives every site of a =13,8 build an aligned ops slot, which
 * call-ops needs: GCC does not apply -falign-functions to functions it
 * optimises for size, such as those that always throw. */
#define TRACED __attribute__((noinline, aligned(16)))
#define UNTRACED __attribute__((noinline, patchable_function_entry(0, 0)))

/* Sanitized builds run the e2e label too, several times slower: the
 * programs shrink their loop counts (never their coverage) there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EH_SANITIZED 1
#endif
#if defined(__SANITIZE_THREAD__)
#define EH_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#undef EH_SANITIZED
#define EH_SANITIZED 1
#endif
#if __has_feature(thread_sanitizer)
#undef EH_TSAN
#define EH_TSAN 1
#endif
#endif

/* The emulated legs (qemu-user, EH_EMULATED from tests/common/
 * isa_tests.cmake) run them 10-40 times slower too: the same smaller
 * counts (the signals programs took 45 s a strategy under qemu-riscv64). */
#if defined(EH_SANITIZED) || defined(EH_EMULATED)
#define EH_SCALE(normal, sanitized) (sanitized)
#else
#define EH_SCALE(normal, sanitized) (normal)
#endif

/* Recursions that end in a throw or a longjmp never return from the
 * bottom, which GCC reports as infinite recursion. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Winfinite-recursion"
#endif

/* Keeps a call's result live after the call, so the call is neither a tail
 * call nor folded into a loop by tail-recursion elimination. */
#define EH_OPAQUE(x) __asm__ volatile("" : "+r"(x))

#endif
