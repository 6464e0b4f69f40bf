// SPDX-License-Identifier: MIT
// The kernel leg's BTI target: traced functions (bti_traced.c) built with
// -mbranch-protection=standard and -fpatchable-function-entry=4,2, on
// pages of their own that it maps PROT_BTI itself (Debian 12's glibc marks
// no ordinary program: TOOLCHAIN.md Q9), called only through function
// pointers, so every call is an indirect branch into a guarded page: an
// entry that does not land on a landing pad is SIGILL. This file is built
// without branch protection: its frames' return addresses are not signed
// (pac-ret), which the injector's remote unwinder cannot read past.
// Driven on stdin like agent_target (agent_e2e.py attach.bti):
//
//   bti_target [SPINNERS]   SPINNERS threads call spin_step through a pointer
//
//   call N    fn_alpha N times, fn_beta 2N, fn_gamma 3N ("called N SUM")
//   guard     whether the traced pages are still BTI-guarded, from
//             /proc/self/smaps ("guard bt" or "guard off")
//   probe     a forked child branches to fn_alpha + 4, past its landing pad
//             ("probe SIGILL" on a guarded page, "probe ran" otherwise)
//   exit CODE stops the spinners, prints "done SUM", exits with CODE
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PROT_BTI
#define PROT_BTI 0x10
#endif

// The traced functions (bti_traced.c), alone on their pages.
extern char __start_ftjit_bti_text[], __stop_ftjit_bti_text[];
long fn_alpha(long x);
long fn_beta(long x);
long fn_gamma(long x);
long spin_step(long x);

// Volatile: the compiler must branch through them (blr), never call
// the functions directly.
static long (*volatile p_alpha)(long) = fn_alpha;
static long (*volatile p_beta)(long) = fn_beta;
static long (*volatile p_gamma)(long) = fn_gamma;
static long (*volatile p_spin)(long) = spin_step;

static atomic_int stop;
static atomic_long sink;

static void* spinner(void* arg) {
  long v = (long)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) v = p_spin(v);
    atomic_store_explicit(&sink, v, memory_order_relaxed);
  }
  return NULL;
}

// Whether the smaps entry covering the traced pages has the "bt" flag.
static int guarded(void) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  uintptr_t at = (uintptr_t)__start_ftjit_bti_text;
  char line[512];
  int inside = 0, result = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') == line + strcspn(line, " ")) {
      inside = at >= lo && at < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      result = strstr(line, " bt") != NULL;
      break;
    }
  }
  fclose(f);
  return result;
}

static const char* probe(void) {
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    long (*past_pad)(long) = (long (*)(long))(void*)((char*)(void*)fn_alpha + 4);
    past_pad(1);
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == SIGILL ? "SIGILL" : "ran";
}

int main(int argc, char** argv) {
  int spinners = argc > 1 ? atoi(argv[1]) : 0;
  uintptr_t lo = (uintptr_t)__start_ftjit_bti_text, hi = (uintptr_t)__stop_ftjit_bti_text;
  long page = sysconf(_SC_PAGESIZE);
  if (lo % (uintptr_t)page || hi % (uintptr_t)page || (uintptr_t)fn_alpha - lo >= (uintptr_t)page) {
    fprintf(stderr, "bti_target: the traced section %#lx-%#lx is not whole pages\n", (unsigned long)lo,
            (unsigned long)hi);
    return 2;
  }
  if (mprotect((void*)lo, hi - lo, PROT_READ | PROT_EXEC | PROT_BTI) != 0) {
    perror("bti_target: mprotect PROT_BTI");
    return 2;
  }
  pthread_t threads[16];
  if (spinners > 16) spinners = 16;
  for (int i = 0; i < spinners; ++i) pthread_create(&threads[i], NULL, spinner, (void*)(long)(i + 1));
  printf("ready\n");
  fflush(stdout);
  long total = 0;
  char line[256];
  int code = 0;
  while (fgets(line, sizeof line, stdin)) {
    long n;
    if (sscanf(line, "call %ld", &n) == 1) {
      long sum = 0;
      for (long i = 0; i < n; ++i) {
        sum += p_alpha(i);
        for (int k = 0; k < 2; ++k) sum += p_beta(i + k);
        for (int k = 0; k < 3; ++k) sum += p_gamma(i + k);
      }
      total += sum;
      printf("called %ld %ld\n", n, sum);
    } else if (strncmp(line, "guard", 5) == 0) {
      printf("guard %s\n", guarded() == 1 ? "bt" : "off");
    } else if (strncmp(line, "probe", 5) == 0) {
      printf("probe %s\n", probe());
    } else if (sscanf(line, "exit %d", &code) == 1) {
      break;
    }
    fflush(stdout);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < spinners; ++i) pthread_join(threads[i], NULL);
  printf("done %ld\n", total);
  fflush(stdout);
  return code;
}
