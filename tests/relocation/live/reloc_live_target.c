// SPDX-License-Identifier: MIT
// Functions without a sled, for the live relocation tests: built with the
// distribution's usual flags (frame pointers kept, -fcf-protection: endbr64
// at every entry on x86-64, which the relocated branch must keep), never
// with -fpatchable-function-entry. reloc_fault_at_k is hand-written so that
// the tests know its first instructions exactly.
#include <stdint.h>

// Data the PC-relative entries below read (their own sections, away from
// the code: a copy's reach to it is what is tested). Hidden: referenced
// pc-relatively from the text.
#define RELOC_DATA __attribute__((visibility("hidden"), used))
RELOC_DATA const uint64_t reloc_data64 = 0x1122334455667788ull;
RELOC_DATA const uint32_t reloc_data32 = 0x89abcdefu;
RELOC_DATA volatile uint8_t reloc_byte = 7;

__attribute__((noinline)) long reloc_live_square(long x) {
  volatile long v = x;
  return v * v;
}

__attribute__((noinline)) long reloc_live_sum(const long* p, long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += p[i];
  return s;
}

// fn(x) + 1: a frame between its caller and fn, which may throw or
// longjmp out through it (built with -fexceptions, as C code that C++
// calls back through is).
__attribute__((noinline)) long reloc_throw_through(long (*fn)(long), long x) {
  volatile long r = fn(x);
  return r + 1;
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
// Entries whose first instructions use the pc (reloc_pc_*: a table in
// relocated_live_test.cpp calls each before and after relocating it):
//   rip_load      mov X(%rip),%rax            RIP-relative load
//   rip_cmp_imm   cmpb $7,X(%rip)             disp32 before an immediate
//   rip_lea       lea X(%rip),%rax            RIP-relative address
//   jcc_fwd       test; je +N                 rel8 forward, made rel32
//   jcc_back      test; jne reloc_pc_target   rel8/32 backward, to another function
__asm__(
    ".text\n"
    ".globl reloc_pc_target\n.type reloc_pc_target,@function\n"
    "reloc_pc_target:\n.cfi_startproc\n  mov $77,%eax\n  ret\n.cfi_endproc\n.size reloc_pc_target,.-reloc_pc_target\n"
    ".globl reloc_pc_rip_load\n.type reloc_pc_rip_load,@function\n"
    "reloc_pc_rip_load:\n.cfi_startproc\n  mov reloc_data64(%rip),%rax\n  add %rdi,%rax\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_rip_load,.-reloc_pc_rip_load\n"
    ".globl reloc_pc_rip_cmp_imm\n.type reloc_pc_rip_cmp_imm,@function\n"
    "reloc_pc_rip_cmp_imm:\n.cfi_startproc\n  cmpb $7,reloc_byte(%rip)\n  sete %al\n  movzbl %al,%eax\n  add %rdi,%rax\n"
    "  ret\n.cfi_endproc\n.size reloc_pc_rip_cmp_imm,.-reloc_pc_rip_cmp_imm\n"
    ".globl reloc_pc_rip_lea\n.type reloc_pc_rip_lea,@function\n"
    "reloc_pc_rip_lea:\n.cfi_startproc\n  lea reloc_data32(%rip),%rax\n  mov (%rax),%eax\n  add %rdi,%rax\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_rip_lea,.-reloc_pc_rip_lea\n"
    ".globl reloc_pc_jcc_fwd\n.type reloc_pc_jcc_fwd,@function\n"
    "reloc_pc_jcc_fwd:\n.cfi_startproc\n  test %rdi,%rdi\n  je 1f\n  mov $2,%eax\n  ret\n1:\n  mov $1,%eax\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_jcc_fwd,.-reloc_pc_jcc_fwd\n"
    ".globl reloc_pc_jcc_back\n.type reloc_pc_jcc_back,@function\n"
    "reloc_pc_jcc_back:\n.cfi_startproc\n  test %rdi,%rdi\n  jne reloc_pc_target\n  mov $3,%eax\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_jcc_back,.-reloc_pc_jcc_back\n");
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
// Entries whose first instruction uses the pc (one word moves on arm64):
//   adr          adr x1, X                 becomes adrp+add in the copy
//   adrp         adrp x1, X (+ add)        the page from the copy's
//   ldr_x/w/sw/d ldr x0|w0 / ldrsw / ldr d0 of a literal (64/32/32s/FP)
//   cbz_fwd      cbz x0, +N                forward
//   tbnz_back    tbnz x0, #0, reloc_pc_target   to another function
__asm__(
    ".text\n"
    ".globl reloc_pc_target\n.type reloc_pc_target,%function\n"
    "reloc_pc_target:\n.cfi_startproc\n  mov x0, #77\n  ret\n.cfi_endproc\n.size reloc_pc_target,.-reloc_pc_target\n"
    ".globl reloc_pc_adr\n.type reloc_pc_adr,%function\n"
    "reloc_pc_adr:\n.cfi_startproc\n  adr x1, reloc_lit64\n  ldr x1, [x1]\n  add x0, x0, x1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_adr,.-reloc_pc_adr\n"
    ".globl reloc_pc_adrp\n.type reloc_pc_adrp,%function\n"
    "reloc_pc_adrp:\n.cfi_startproc\n  adrp x1, reloc_data64\n  add x1, x1, :lo12:reloc_data64\n  ldr x1, [x1]\n"
    "  add x0, x0, x1\n  ret\n.cfi_endproc\n.size reloc_pc_adrp,.-reloc_pc_adrp\n"
    ".globl reloc_pc_ldr_x\n.type reloc_pc_ldr_x,%function\n"
    "reloc_pc_ldr_x:\n.cfi_startproc\n  ldr x1, reloc_lit64\n  add x0, x0, x1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_ldr_x,.-reloc_pc_ldr_x\n"
    ".globl reloc_pc_ldr_w\n.type reloc_pc_ldr_w,%function\n"
    "reloc_pc_ldr_w:\n.cfi_startproc\n  ldr w1, reloc_lit32\n  add x0, x0, x1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_ldr_w,.-reloc_pc_ldr_w\n"
    ".globl reloc_pc_ldr_sw\n.type reloc_pc_ldr_sw,%function\n"
    "reloc_pc_ldr_sw:\n.cfi_startproc\n  ldrsw x1, reloc_lit32\n  add x0, x0, x1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_ldr_sw,.-reloc_pc_ldr_sw\n"
    ".globl reloc_pc_ldr_d\n.type reloc_pc_ldr_d,%function\n"
    "reloc_pc_ldr_d:\n.cfi_startproc\n  ldr d1, reloc_litd\n  fmov x1, d1\n  add x0, x0, x1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_ldr_d,.-reloc_pc_ldr_d\n"
    ".globl reloc_pc_cbz_fwd\n.type reloc_pc_cbz_fwd,%function\n"
    "reloc_pc_cbz_fwd:\n.cfi_startproc\n  cbz x0, 1f\n  mov x0, #2\n  ret\n1:\n  mov x0, #1\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_cbz_fwd,.-reloc_pc_cbz_fwd\n"
    ".globl reloc_pc_tbnz_back\n.type reloc_pc_tbnz_back,%function\n"
    "reloc_pc_tbnz_back:\n.cfi_startproc\n  tbnz x0, #0, reloc_pc_target\n  mov x0, #3\n  ret\n"
    ".cfi_endproc\n.size reloc_pc_tbnz_back,.-reloc_pc_tbnz_back\n"
    // The literals, in the text (LDR literal reaches 1 MiB), not inside any
    // function's symbol.
    ".p2align 3\n"
    "reloc_lit64: .quad 0x1122334455667788\n"
    "reloc_lit32: .word 0x89abcdef\n"
    ".p2align 3\n"
    "reloc_litd: .double 2.5\n");
#elif defined(__riscv) && __riscv_xlen == 64
// The load at +2, inside the bytes either entry branch overwrites (jal: 4,
// auipc+jalr: 8):
//   +0 862a       c.mv a2, a0
//   +2 0005a303   lw t1, 0(a1)          <- a fault here stops a thread at +2
//   +6 00660533   add a0, a2, t1
//   +a 8082       ret
__asm__(
    ".text\n"
    ".globl reloc_fault_at_k\n"
    ".type reloc_fault_at_k,@function\n"
    ".p2align 2\n"
    "reloc_fault_at_k:\n"
    ".cfi_startproc\n"
    "  c.mv a2, a0\n"
    "  lw t1, 0(a1)\n"
    "  add a0, a2, t1\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size reloc_fault_at_k,.-reloc_fault_at_k\n");
// Entries whose first instructions use the pc (the branch moves 4 bytes
// or 8, by the stub's distance: each shape is right either way):
//   auipc_addi    auipc+addi of a datum's address, both moved
//   auipc_ld      auipc+ld of a datum
//   auipc_split   auipc at +0, its lwu at +8: moved alone (jal) or both
//   beq_fwd       beq a0, zero, +N   (4 bytes)     forward
//   bne_back      bne a0, zero, reloc_pc_target    backward, another function
//   c_beqz_fwd    c.beqz a0, +N      (2 bytes)     forward
//   c_bnez_back   c.bnez a0, reloc_pc_target       backward
#define RV_FN(name, body) \
  ".globl " #name "\n.type " #name ",@function\n.p2align 2\n" #name ":\n.cfi_startproc\n" body \
  ".cfi_endproc\n.size " #name ",.-" #name "\n"
__asm__(
    ".text\n"
    RV_FN(reloc_pc_target, ".Lrv_target:\n  li a0, 77\n  ret\n")
    RV_FN(reloc_pc_auipc_addi, "1: auipc a1, %pcrel_hi(reloc_data64)\n  addi a1, a1, %pcrel_lo(1b)\n"
                               "  ld a1, 0(a1)\n  add a0, a0, a1\n  ret\n")
    RV_FN(reloc_pc_auipc_ld, "1: auipc a1, %pcrel_hi(reloc_data64)\n  ld a1, %pcrel_lo(1b)(a1)\n"
                             "  add a0, a0, a1\n  ret\n")
    RV_FN(reloc_pc_auipc_split, ".option push\n.option norvc\n"
                                "1: auipc a1, %pcrel_hi(reloc_data32)\n  addi a2, a0, 1\n"
                                "  lwu a1, %pcrel_lo(1b)(a1)\n  add a0, a2, a1\n.option pop\n  ret\n")
    RV_FN(reloc_pc_beq_fwd, ".option push\n.option norvc\n  beq a0, zero, 1f\n  li a0, 2\n  ret\n"
                            "1:\n  li a0, 1\n  ret\n.option pop\n")
    RV_FN(reloc_pc_bne_back, ".option push\n.option norvc\n  bne a0, zero, .Lrv_target\n  li a0, 3\n"
                             "  ret\n.option pop\n")
    RV_FN(reloc_pc_c_beqz_fwd, "  c.beqz a0, 1f\n  c.li a0, 1\n  c.addi a0, 1\n  c.jr ra\n1:\n  c.li a0, 1\n  c.jr ra\n")
    RV_FN(reloc_pc_c_bnez_back, "  c.bnez a0, .Lrv_target\n  c.li a0, 2\n  c.addi a0, 1\n  c.jr ra\n"));
// A function 1.5 MiB from either end of the library's text: no stub can be
// within a jal's +-1 MiB of it (the library's own pages are there), so its
// entry becomes auipc+jalr, where the others' is a jal to a stub nearby.
// The padding is zeros (c.unimp: no flow runs through it into the entry).
__asm__(
    ".text\n"
    RV_FN(reloc_far_pad_before, "  ret\n  .skip 0x180000\n")
    RV_FN(reloc_far_entry, "  addi a0, a0, 1\n  addi a0, a0, 2\n  addi a0, a0, 3\n  addi a0, a0, 4\n  ret\n")
    RV_FN(reloc_far_pad_after, "  ret\n  .skip 0x180000\n"));
#endif
