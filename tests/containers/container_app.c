// SPDX-License-Identifier: MIT
// The program container_e2e.py runs in its own mount and PID namespace,
// driven line by line on stdin so that the test never sleeps to
// synchronise. One thread spins through app_spin, so that a thread is
// always running when ftjit stops the process.
//
// Commands (each answered by one line on stdout):
//   call N    app_work N times, lib_square 2N, lib_mix 3N ("called N SUM")
//   exit      stops the spinner, prints "done", exits 0
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define TRACED __attribute__((noinline, noipa))
#define UNTRACED __attribute__((noinline, patchable_function_entry(0, 0)))

long lib_square(long x);
long lib_mix(long x);

static atomic_long sink;
static atomic_int stop;

TRACED long app_work(long x) { return x * 7 + 3; }
TRACED long app_spin(long x) { return (long)((unsigned long)x * 2654435761UL + 1); }

UNTRACED static void* spinner(void* arg) {
  long v = (long)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) v = app_spin(v);
    atomic_store_explicit(&sink, v, memory_order_relaxed);
  }
  return NULL;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t thread;
  if (pthread_create(&thread, NULL, spinner, NULL) != 0) return 100;
  printf("ready\n");
  char line[256];
  while (fgets(line, sizeof line, stdin) != NULL) {
    long n = 0;
    if (sscanf(line, "call %ld", &n) == 1) {
      unsigned long sum = 0;
      for (long i = 0; i < n; ++i) sum += (unsigned long)app_work(i);
      for (long i = 0; i < 2 * n; ++i) sum += (unsigned long)lib_square(i);
      for (long i = 0; i < 3 * n; ++i) sum += (unsigned long)lib_mix(i);
      printf("called %ld %lu\n", n, sum);
    } else if (strncmp(line, "exit", 4) == 0) {
      break;
    } else {
      printf("unknown command: %s", line);
      return 101;
    }
  }
  atomic_store(&stop, 1);
  pthread_join(thread, NULL);
  printf("done\n");
  return 0;
}
