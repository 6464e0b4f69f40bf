/* SPDX-License-Identifier: MIT */
/* Functions the host's e2e tests trace (-fpatchable-function-entry=5).
 * noipa: no inlining and no clones, so every call goes through the entry. */
#include "traced_host.h"

__attribute__((noipa)) int host_traced_a(int x) { return x + 1; }
__attribute__((noipa)) int host_traced_b(int x) { return x * 2; }
__attribute__((noipa)) int host_traced_c(int x) { return host_traced_a(x) - 1; }
/* Writes eax only: test_call_keeping_registers (register_keeping_call.S)
 * keeps values in every other call-clobbered register across it. */
__attribute__((noipa)) int host_traced_add(int a, int b) { return a + b; }
