/* SPDX-License-Identifier: MIT */
/* The record-control fixture's driver (untraced): the main thread and
 * four named threads (rc-0..rc-3) run the traced tree (record_tree.c) in
 * phases separated by barriers, so that a trigger fired by the main
 * thread falls between the other threads' calls, never among them:
 *
 *   0 main rc_root        5 main rc_root
 *   1 threads rc_root     6 main rc_start_marker (its 2nd call)
 *   2 main rc_start_marker 7 threads rc_root
 *   3 threads rc_root     8 main rc_stop_marker (its 2nd call)
 *   4 main rc_stop_marker 9 threads rc_root
 *
 * At the end it prints every call it made, in each thread's order, with
 * its depth among traced calls and its duration as the call itself saw
 * it: the test's oracle for what each record option must keep.
 *
 *   thread NAME TID
 *   call NAME ORDER FUNCTION DEPTH PHASE DURATION_NS
 *
 * RC_RAISE=SIG in its environment: it sends itself that signal at the
 * start of phase 6, just before the marker. RC_RUN_ON=N: right after
 * phase 4's marker the main thread makes N more rc_mid trees (ten calls
 * each) at once, before any other thread can have run: what a dump at
 * the marker holds must not be overwritten by them. RC_DUMP_WAIT=PATH:
 * then it waits (up to 30 s) for that dump in PATH, the trace's file,
 * before phase 5: a flight recorder drops what comes while it is copied
 * out, and under qemu on a loaded machine the copy of phase 4 once
 * outlasted phases 5 and 6, whose marker the test looks for. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record_fixture.h"

#define THREADS 4
#define PHASES 10
#define MAX_CALLS 4096

static const char* const kNames[RC_FUNCS] = {"rc_root", "rc_fast", "rc_slow", "rc_mid",
                                              "rc_leaf", "rc_deep", "rc_start_marker",
                                              "rc_stop_marker"};

struct call {
  int fn, depth, phase;
  uint64_t start_ns, duration_ns;
};

struct log {
  char name[16];
  int tid;
  int n, depth;
  struct call calls[MAX_CALLS];
};

static struct log logs[THREADS + 1]; /* [THREADS]: main */
static __thread struct log* self;
static int phase;
static pthread_barrier_t barrier;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rc_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int rc_log_enter(int fn) {
  struct log* l = self;
  if (l->n >= MAX_CALLS) return -1;
  struct call* c = &l->calls[l->n];
  c->fn = fn;
  c->depth = ++l->depth;
  c->phase = phase;
  c->start_ns = now_ns();
  return l->n++;
}

void rc_log_leave(int handle) {
  struct log* l = self;
  --l->depth;
  if (handle >= 0) l->calls[handle].duration_ns = now_ns() - l->calls[handle].start_ns;
}

static void enter_log(int index, const char* name) {
  self = &logs[index];
  snprintf(self->name, sizeof self->name, "%s", name);
  self->tid = (int)syscall(SYS_gettid);
}

static void* worker(void* arg) {
  const int t = (int)(intptr_t)arg;
  char name[16];
  snprintf(name, sizeof name, "rc-%d", t);
  pthread_setname_np(pthread_self(), name);
  enter_log(t, name);
  for (int p = 0; p < PHASES; ++p) {
    pthread_barrier_wait(&barrier);
    if (p == 1 || p == 3 || p == 7 || p == 9) rc_root(t);
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

/* Waits until PATH has bytes (the trigger's dump was written), up to
 * 30 s; then on, as the test will tell. */
static void wait_for_dump(const char* path) {
  for (int i = 0; i < 30000; ++i) {
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0) return;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

int main(void) {
  const char* raise_env = getenv("RC_RAISE");
  const int raise_signal = raise_env != NULL ? atoi(raise_env) : 0;
  const char* run_on_env = getenv("RC_RUN_ON");
  const int run_on = run_on_env != NULL ? atoi(run_on_env) : 0;
  const char* dump_wait = getenv("RC_DUMP_WAIT");
  enter_log(THREADS, "main");
  pthread_barrier_init(&barrier, NULL, THREADS + 1);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t);
  for (int p = 0; p < PHASES; ++p) {
    phase = p;
    pthread_barrier_wait(&barrier);
    if (p == 0 || p == 5) rc_root(THREADS);
    /* RC_RAISE=SIG: that signal to itself just before phase 6's marker
     * (ftjit run --on-signal SIG:start must start recording there). */
    if (p == 6 && raise_signal != 0) raise(raise_signal);
    if (p == 2 || p == 6) rc_start_marker();
    if (p == 4 || p == 8) rc_stop_marker();
    if (p == 4) {
      for (int i = 0; i < run_on; ++i) rc_mid(THREADS);
      if (dump_wait != NULL) wait_for_dump(dump_wait);
    }
    pthread_barrier_wait(&barrier);
  }
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  for (int i = 0; i <= THREADS; ++i) printf("thread %s %d\n", logs[i].name, logs[i].tid);
  for (int i = 0; i <= THREADS; ++i) {
    const struct log* l = &logs[i];
    for (int k = 0; k < l->n; ++k) {
      const struct call* c = &l->calls[k];
      printf("call %s %d %s %d %d %llu\n", l->name, k, kNames[c->fn], c->depth, c->phase,
             (unsigned long long)c->duration_ns);
    }
  }
  return 0;
}
