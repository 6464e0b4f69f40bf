/* SPDX-License-Identifier: MIT */
/* The profiled program's own work, built with -fpatchable-function-entry=5. */
__attribute__((noinline)) int work_leaf(int x) { return x * 3 + 1; }

/* Recursing through a volatile pointer keeps every call a real call (GCC
 * would otherwise turn half the recursion into a loop). */
int work_fib(int n);
int (*volatile work_fib_self)(int) = work_fib;
__attribute__((noinline)) int work_fib(int n) {
  return n < 2 ? work_leaf(n) : work_fib_self(n - 1) + work_fib_self(n - 2);
}

__attribute__((noinline)) int work_loop(int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += work_leaf(i);
  return sum;
}
