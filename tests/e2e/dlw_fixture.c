/* SPDX-License-Identifier: MIT */
/* A library the dlopen-watch tests load after attach (never linked in). */
__attribute__((noinline, used)) int dlw_add(int a, int b) { return a + b; }
__attribute__((noinline, used)) int dlw_mul(int a, int b) { return a * b + 1; }
__attribute__((noinline, used)) int dlw_sub(int a, int b) { return a - b; }
