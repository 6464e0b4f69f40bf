/* SPDX-License-Identifier: MIT */
/* A 32-bit x86 program (another ISA than ftjit attach serves): sleeps in a
   loop, no libc. Built with `as --32` and `ld -m elf_i386` at configure
   time; the test is left out where binutils cannot. */
  .globl _start
  .text
_start:
1:
  movl $162, %eax        # nanosleep(&ts, 0)
  movl $ts, %ebx
  xorl %ecx, %ecx
  int $0x80
  jmp 1b
  .data
ts: .long 1, 0
