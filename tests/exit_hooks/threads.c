/* SPDX-License-Identifier: MIT */
/* Many short-lived threads running traced code, created and joined in
 * rounds, and leaving in every way a thread can:
 *   - returning from a traced start routine (its exit trampoline returns
 *     into glibc's start_thread);
 *   - pthread_exit() three traced frames deep, and straight from the start
 *     routine;
 *   - deferred cancellation acted on at a pthread_testcancel() deep in
 *     traced frames.
 * pthread_exit and cancellation unwind the thread's stack with
 * _Unwind_ForcedUnwind, which glibc calls inside libgcc_s (looked up with
 * dlsym, not through the executable's symbols) and which stops at the
 * first frame it cannot walk, longjmp'ing to start_thread. Either way the
 * traced frames never return: each must still get one exit, reported as
 * unwound, before the thread is gone; the harness counts entries left open
 * on a finished thread as "leftover". The cancellation cleanup handler
 * pushed in a traced frame must run all the same (printed). C++ frames
 * (destructors on pthread_exit and cancellation) are in exceptions.cpp,
 * scenario forced_unwind. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

#define THREADS 16
#define ROUNDS EH_SCALE(40, 12)
#define CALLS 2000u

static __thread uint32_t t_acc;

typedef struct job {
  uint32_t index;
  uint32_t round;
  uint32_t result;  /* written by the thread before it leaves */
} job;

TRACED static uint32_t mix(uint32_t a, uint32_t b) {
  uint32_t h = a ^ (b * 0x9e3779b9u);
  h ^= h >> 15;
  h *= 0x85ebca6bu;
  t_acc += h & 0xffu;
  return h;
}

TRACED static uint32_t work(uint32_t seed) {
  uint32_t h = seed;
  for (uint32_t i = 0; i < CALLS; ++i) h = mix(h, i);
  return h;
}

TRACED static void leave_deep3(job *j, uint32_t v) {
  j->result = v;
  pthread_exit((void *)(uintptr_t)(v & 0xffffu));
}
TRACED static void leave_deep2(job *j, uint32_t v) {
  leave_deep3(j, mix(v, 2));
  j->result = 0; /* not reached */
}
TRACED static void leave_deep1(job *j, uint32_t v) {
  leave_deep2(j, mix(v, 1));
  j->result = 0; /* not reached */
}

static uint32_t g_cleanups[THREADS];

TRACED static void cleanup(void *arg) {
  job *j = arg;
  g_cleanups[j->index] += 1;
}

TRACED static void spin_until_cancelled(job *j, uint32_t v) {
  j->result = v;
  pthread_cleanup_push(cleanup, j);
  for (;;) pthread_testcancel();
  pthread_cleanup_pop(0);
}
TRACED static void cancel_deep(job *j, uint32_t v) {
  spin_until_cancelled(j, mix(v, 3));
  j->result = 0; /* not reached */
}

TRACED static void *worker(void *arg) {
  job *j = arg;
  uint32_t v = work(j->index * 1000u + j->round) + t_acc;
  switch (j->index % 4) {
    case 0:
      j->result = v;
      return (void *)(uintptr_t)(v & 0xffffu);
    case 1:
      leave_deep1(j, v);
      break;
    case 2:
      j->result = v;
      pthread_exit((void *)(uintptr_t)(v & 0xffffu));
    case 3:
      cancel_deep(j, v);
      break;
  }
  return NULL;
}

UNTRACED int main(void) {
  selftrace_begin();
  static job jobs[THREADS];
  for (uint32_t round = 0; round < ROUNDS; ++round) {
    pthread_t tids[THREADS];
    for (uint32_t i = 0; i < THREADS; ++i) {
      jobs[i] = (job){i, round, 0};
      if (pthread_create(&tids[i], NULL, worker, &jobs[i]) != 0) {
        perror("pthread_create");
        return 1;
      }
      /* Deferred: acted on at the thread's first cancellation point, the
       * testcancel loop, wherever the request lands before it. */
      if (i % 4 == 3) pthread_cancel(tids[i]);
    }
    printf("round %2u:", round);
    for (uint32_t i = 0; i < THREADS; ++i) {
      void *ret = NULL;
      pthread_join(tids[i], &ret);
      if (ret == PTHREAD_CANCELED) {
        printf(" %08x/cancelled", jobs[i].result);
      } else {
        printf(" %08x/%04x", jobs[i].result, (unsigned)(uintptr_t)ret);
      }
    }
    printf("\n");
  }
  printf("cleanup handlers:");
  for (uint32_t i = 0; i < THREADS; ++i) printf(" %u", g_cleanups[i]);
  printf("\n");
  /* The main thread's own traced work between the rounds' threads. */
  printf("main: %08x acc=%u\n", work(7), t_acc);
  return 0;
}
