// SPDX-License-Identifier: MIT
// ftjit-demo-service: the bundled target for `ftjit attach` and `ftjit run`.
// Four worker threads process a fixed number of record batches (so its
// output is the same traced or not) and the main thread prints progress.
// It has no ftjit inside: only -fpatchable-function-entry in workload.c.
//
//   ftjit-demo-service [SECONDS]   (default 3: about how long it runs)
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "demo/workload.h"

enum { kThreads = 4, kRecords = 256 };

static long g_batches_per_thread;
static uint64_t g_sums[kThreads];

static void* worker(void* arg) {
  long t = (long)arg;
  uint64_t sum = 0;
  for (long b = 0; b < g_batches_per_thread; ++b) {
    sum += demo_process_batch((uint32_t)(t * 1000003 + b), kRecords);
  }
  g_sums[t] = sum;
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  if (seconds <= 0) seconds = 3.0;
  // Batches are fixed from the requested time at an assumed untraced rate,
  // not measured: the output must not depend on how fast this run goes.
  g_batches_per_thread = (long)(seconds * 15000);
  printf("demo service: %d threads x %ld batches of %d records\n", kThreads,
         g_batches_per_thread, kRecords);
  fflush(stdout);
  double start = now_s();
  pthread_t threads[kThreads];
  for (long t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, worker, (void*)t);
  uint64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    total += g_sums[t];
  }
  printf("demo service: done, checksum %016llx\n", (unsigned long long)total);
  fprintf(stderr, "demo service: %.2f s\n", now_s() - start);
  return 0;
}
