/* SPDX-License-Identifier: MIT */
/* The self-tracing harness of the exit-hook programs. With FTJIT_SELFTRACE
 * unset both calls do nothing, so the same binary gives the untraced
 * reference output. */
#ifndef FTJIT_TESTS_EXIT_HOOKS_SELFTRACE_H
#define FTJIT_TESTS_EXIT_HOOKS_SELFTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* First thing in main: creates the engine and attaches the checking ops to
 * every patchable function of the executable (FTJIT_SELFTRACE = generated,
 * call-ops, list or auto). Also registers selftrace_end with atexit. */
void selftrace_begin(void);

/* Detaches (in the process that attached), prints the summary line to
 * stderr and destroys the engine. Safe to call more than once; a forked
 * child calls it before _exit, when atexit handlers do not run. */
void selftrace_end(void);

#ifdef __cplusplus
}
#endif
#endif
