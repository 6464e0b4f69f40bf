/* SPDX-License-Identifier: MIT */
/* Deep recursion of traced functions: 100000 live traced frames on one
 * thread (a pthread with a 256 MiB stack, so every build, -O0 and
 * sanitized ones included, has room), mutual recursion, and tail-call
 * recursion, where the native stack stays flat while every call still
 * enters a traced function through the same return-address slot. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

/* ThreadSanitizer keeps its own fixed-size shadow call stack per thread
 * (64Ki frames in the LLVM-derived runtimes); stay inside it. run.sh reads
 * the depth reached from the "depth:" line. */
#if defined(EH_DEPTH)
#define DEPTH EH_DEPTH /* set by the build: emulated legs go less deep (CI time) */
#elif defined(EH_TSAN)
#define DEPTH 50000u
#elif defined(EH_SANITIZED)
#define DEPTH 25000u /* ASan: the full depth is the normal build's (CI time) */
#else
#define DEPTH 100000u
#endif

TRACED static uint64_t sum_down(uint32_t n) {
  if (n == 0) return 0;
  uint64_t r = sum_down(n - 1);
  EH_OPAQUE(r);
  return r + n;
}

/* Mutual recursion; the results depend on the path taken. */
TRACED static uint64_t pong(uint32_t n);
TRACED static uint64_t ping(uint32_t n) {
  if (n == 0) return 1;
  uint64_t r = pong(n - 1);
  EH_OPAQUE(r);
  return r * 3u + n;
}
TRACED static uint64_t pong(uint32_t n) {
  if (n == 0) return 2;
  uint64_t r = ping(n - 1);
  EH_OPAQUE(r);
  return r * 5u + (n & 7u);
}

/* Tail calls: with -O2 each is a jmp into the other's patched entry. */
TRACED static int is_odd(uint32_t n);
TRACED static int is_even(uint32_t n) { return n == 0 ? 1 : is_odd(n - 1); }
TRACED static int is_odd(uint32_t n) { return n == 0 ? 0 : is_even(n - 1); }

/* A tree of calls: many short-lived frames around a deep spine. */
TRACED static uint64_t fib(uint32_t n) {
  if (n < 2) return n;
  uint64_t a = fib(n - 1);
  EH_OPAQUE(a);
  return a + fib(n - 2);
}

TRACED static void *deep_thread(void *arg) {
  uint64_t *out = arg;
  out[0] = sum_down(DEPTH);
  out[1] = ping(DEPTH);
  out[2] = (uint64_t)is_even(DEPTH) * 10u + (uint64_t)is_odd(DEPTH + 1u);
  out[3] = fib(EH_SCALE(27u, 22u));
  out[4] = sum_down(DEPTH / 2);  /* again, after the stack was unwound */
  return NULL;
}

UNTRACED int main(void) {
  selftrace_begin();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)256 << 20);
  uint64_t out[5] = {0};
  pthread_t t;
  if (pthread_create(&t, &attr, deep_thread, out) != 0) {
    perror("pthread_create");
    return 1;
  }
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  printf("depth: %u\n", DEPTH);
  printf("sum_down: %llu\n", (unsigned long long)out[0]);
  printf("ping: %llu\n", (unsigned long long)out[1]);
  printf("parity: %llu\n", (unsigned long long)out[2]);
  printf("fib: %llu\n", (unsigned long long)out[3]);
  printf("sum_down again: %llu\n", (unsigned long long)out[4]);
  return 0;
}
