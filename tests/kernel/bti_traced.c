// SPDX-License-Identifier: MIT
// bti_target's traced functions, built with -mbranch-protection=standard
// (each begins with a landing pad). bti_pad.S ends their section on a page
// boundary and the first function starts it on one, so the pages the
// target guards with PROT_BTI hold only code built with landing pads.
#define TRACED __attribute__((noinline, noipa, section("ftjit_bti_text")))

TRACED __attribute__((aligned(4096))) long fn_alpha(long x) { return (long)((unsigned long)x * 3 + 1); }
TRACED long fn_beta(long x) { return (x ^ 0x5a5a) + 7; }
TRACED long fn_gamma(long x) { return x % 1000 + 11; }
TRACED long spin_step(long x) { return (long)((unsigned long)x * 2654435761UL + 1); }
