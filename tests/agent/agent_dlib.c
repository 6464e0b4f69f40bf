// SPDX-License-Identifier: MIT
// A patchable library the agent target dlopens after the attach.
#define TRACED __attribute__((noinline, noipa))
TRACED long dl_one(long x) { return x * 5 + 2; }
TRACED long dl_two(long x) { return (x & 0xff) + 13; }
