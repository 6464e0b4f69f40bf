/* SPDX-License-Identifier: MIT */
/* Signal handlers that run traced code while traced code runs:
 *   - timer signals (setitimer, SIGALRM every 50 us) landing anywhere in a
 *     traced compute loop, trampolines and callbacks included, with the
 *     handler on the interrupted stack and on a sigaltstack;
 *   - the same on a thread whose alternate stack lies at a HIGHER address
 *     than its own stack, so a handler's frames look "older" than the
 *     frames it interrupted to anything that compares stack addresses
 *     (which is how stale shadow entries are usually found);
 *   - synchronous raise() deep in traced frames, a handler raising a
 *     second signal from traced code (nested handlers), on both stacks.
 * Nothing here leaves a frame early: no exit may be reported unwound.
 * How often the timer fires varies, so only its count goes to stderr;
 * stdout gets only what every run computes identically. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

#define ALT_SIZE ((size_t)256 << 10)
#define THREAD_STACK ((size_t)8 << 20)

static volatile sig_atomic_t g_alarms, g_alarm_bad;
static volatile sig_atomic_t g_usr1, g_usr2, g_usr_bad;
static uint32_t g_expected[64];

TRACED static uint32_t handler_hash(uint32_t k) {
  uint32_t h = k * 0x9e3779b9u;
  h ^= h >> 13;
  return h * 0xc2b2ae35u;
}

TRACED static uint32_t handler_work(uint32_t k) {
  uint32_t h = handler_hash(k);
  EH_OPAQUE(h);
  return h ^ handler_hash(k + 1);
}

TRACED static void on_alarm(int sig) {
  (void)sig;
  uint32_t k = (uint32_t)g_alarms % 64u;
  if (handler_work(k) != g_expected[k]) g_alarm_bad = g_alarm_bad + 1;
  g_alarms = g_alarms + 1;
}

TRACED static void on_usr2(int sig) {
  (void)sig;
  uint32_t k = (uint32_t)g_usr2 % 64u;
  if (handler_work(k) != g_expected[k]) g_usr_bad = g_usr_bad + 1;
  g_usr2 = g_usr2 + 1;
}

TRACED static void raise_usr2(void) { raise(SIGUSR2); }

TRACED static void on_usr1(int sig) {
  (void)sig;
  uint32_t k = (uint32_t)g_usr1 % 64u;
  if (handler_work(k) != g_expected[k]) g_usr_bad = g_usr_bad + 1;
  g_usr1 = g_usr1 + 1;
  if (g_usr1 % 2 == 0) raise_usr2();
}

/* The traced compute loop the timer interrupts. */
TRACED static uint32_t step(uint32_t h, uint32_t i) {
  h ^= i * 0x85ebca6bu;
  return (h << 7) | (h >> 25);
}
TRACED static uint32_t inner(uint32_t h, uint32_t i) {
  uint32_t r = step(h, i);
  EH_OPAQUE(r);
  return step(r, i + 1);
}
TRACED static uint32_t crunch(uint32_t n) {
  uint32_t h = 1;
  for (uint32_t i = 0; i < n; ++i) h = inner(h, i);
  return h;
}

TRACED static uint32_t deep_raise(uint32_t levels, uint32_t v) {
  if (levels == 0) {
    raise(SIGUSR1);
    return v;
  }
  uint32_t r = deep_raise(levels - 1, v * 3u + levels);
  EH_OPAQUE(r);
  return r + 1u;
}
TRACED static uint32_t raise_loop(uint32_t n) {
  uint32_t sum = 0;
  for (uint32_t i = 0; i < n; ++i) sum += deep_raise(1 + i % 7, i);
  return sum;
}

static void install(int sig, void (*fn)(int), int on_altstack) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = SA_RESTART | (on_altstack ? SA_ONSTACK : 0);
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

static void use_altstack(void *base) {
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = base;
  ss.ss_size = ALT_SIZE;
  if (sigaltstack(&ss, NULL) != 0) perror("sigaltstack");
}

static void timer(long usec) {
  struct itimerval it;
  memset(&it, 0, sizeof it);
  it.it_interval.tv_usec = usec;
  it.it_value.tv_usec = usec;
  setitimer(ITIMER_REAL, &it, NULL);
}

/* One phase: the loop under the timer, then the raise loop. */
UNTRACED static void phase(const char *name, int on_altstack) {
  install(SIGALRM, on_alarm, on_altstack);
  install(SIGUSR1, on_usr1, on_altstack);
  install(SIGUSR2, on_usr2, on_altstack);
  sig_atomic_t alarms_before = g_alarms;
  timer(50);
  uint32_t h = crunch(EH_SCALE(400000u, 100000u));
  timer(0);
  uint32_t r = raise_loop(EH_SCALE(20000u, 5000u));
  printf("%s: crunch=%08x raise=%08x\n", name, h, r);
  fprintf(stderr, "signals: %s: %d timer signals handled\n", name, (int)(g_alarms - alarms_before));
}

UNTRACED static void *altstack_above_thread(void *region) {
  /* The alternate stack is the top of the region, above this thread's
   * stack (the bottom of the same mapping). */
  use_altstack((char *)region + THREAD_STACK);
  phase("thread, altstack above its stack", 1);
  return NULL;
}

UNTRACED int main(void) {
  selftrace_begin();
  for (uint32_t k = 0; k < 64; ++k) g_expected[k] = handler_work(k);

  phase("main, handlers on the interrupted stack", 0);

  static char main_alt[ALT_SIZE];
  use_altstack(main_alt);
  phase("main, handlers on the altstack", 1);
  stack_t off;
  memset(&off, 0, sizeof off);
  off.ss_flags = SS_DISABLE;
  sigaltstack(&off, NULL);

  /* Only the thread takes SIGALRM while it runs. */
  sigset_t alrm, old;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, &old);
  void *region = mmap(NULL, THREAD_STACK + ALT_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, region, THREAD_STACK);
  pthread_t t;
  sigset_t unblocked = old;
  sigdelset(&unblocked, SIGALRM);
  pthread_attr_setsigmask_np(&attr, &unblocked);
  if (pthread_create(&t, &attr, altstack_above_thread, region) != 0) {
    perror("pthread_create");
    return 1;
  }
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);

  printf("usr1=%d usr2=%d handler mismatches=%d timer mismatches=%d\n", (int)g_usr1, (int)g_usr2,
         (int)g_usr_bad, (int)g_alarm_bad);
  return 0;
}
