/* SPDX-License-Identifier: MIT */
/* live_target.c's traced functions. */
static volatile long sink;

__attribute__((noinline)) void lt_a(int i) { sink += i; }
__attribute__((noinline)) void lt_b(int i) { sink -= i; }
__attribute__((noinline)) void lt_c(int i) { sink ^= i; }
