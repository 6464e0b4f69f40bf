// SPDX-License-Identifier: MIT
// The library of the container test's program: linked by it (DT_NEEDED,
// found through $ORIGIN), so that inside the container both live only in
// its own tmpfs, where the host cannot name them by path.
#define TRACED __attribute__((noinline, noipa))
TRACED long lib_square(long x) { return x * x + 1; }
TRACED long lib_mix(long x) { return (x ^ 0x3c3c) + 5; }
