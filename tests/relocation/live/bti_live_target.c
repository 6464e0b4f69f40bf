// SPDX-License-Identifier: MIT
// A BTI-marked library (-mbranch-protection=standard -Wl,-z,force-bti):
// on a CPU with BTI, the loader maps its text with PROT_BTI, where an
// indirect branch must land on a landing pad. bti_square has one (bti c,
// or paciasp), bti_canary has none: called through a pointer it traps
// (SIGILL) exactly while its page is guarded. Both in one .text, one
// mapping: the canary says whether the pages ftjit rewrote stay guarded.
long bti_square(long x) {
  volatile long v = x;
  return v * v;
}

__asm__(
    ".text\n"
    ".globl bti_canary\n"
    ".type bti_canary,%function\n"
    "bti_canary:\n"
    ".cfi_startproc\n"
    "  mov x0, #42\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size bti_canary,.-bti_canary\n");
