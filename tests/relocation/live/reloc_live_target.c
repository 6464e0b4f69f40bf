// SPDX-License-Identifier: MIT
// Functions without a sled, for the live relocation tests: built with the
// distribution's usual flags (frame pointers kept, -fcf-protection: endbr64
// at every entry on x86-64, which the relocated branch must keep), never
// with -fpatchable-function-entry. reloc_fault_at_k is hand-written so that
// the tests know its first instructions exactly.
#include <stdint.h>

__attribute__((noinline)) long reloc_live_square(long x) {
  volatile long v = x;
  return v * v;
}

__attribute__((noinline)) long reloc_live_sum(const long* p, long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += p[i];
  return s;
}

__attribute__((noinline)) long reloc_live_mix(long a, long b) {
  volatile long t = a ^ (b << 3);
  return t + reloc_live_square(b);
}

#if defined(__x86_64__)
// long reloc_fault_at_k(long x, const int* p): x + *p, the load at entry+3,
// inside the 5 bytes a relocated entry overwrites:
//   +0 48 89 f8   mov %rdi,%rax
//   +3 8b 0e      mov (%rsi),%ecx      <- a fault here stops a thread at +3
//   +5 48 01 c8   add %rcx,%rax
//   +8 c3         ret
__asm__(
    ".text\n"
    ".globl reloc_fault_at_k\n"
    ".type reloc_fault_at_k,@function\n"
    "reloc_fault_at_k:\n"
    ".cfi_startproc\n"
    "  mov %rdi,%rax\n"
    "  movl (%rsi),%ecx\n"
    "  add %rcx,%rax\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size reloc_fault_at_k,.-reloc_fault_at_k\n");
#elif defined(__aarch64__)
// The same at +0 (arm64 overwrites one instruction): the load is the
// first instruction, so a thread faulting there stands at the entry, and
// one faulting in the copy stands inside the stub.
//   +0 b9400022   ldr w2, [x1]
//   +4 8b020000   add x0, x0, x2
//   +8 d65f03c0   ret
__asm__(
    ".text\n"
    ".globl reloc_fault_at_k\n"
    ".type reloc_fault_at_k,%function\n"
    "reloc_fault_at_k:\n"
    ".cfi_startproc\n"
    "  ldr w2, [x1]\n"
    "  add x0, x0, x2\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size reloc_fault_at_k,.-reloc_fault_at_k\n");
#endif
