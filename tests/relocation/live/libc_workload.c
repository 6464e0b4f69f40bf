// SPDX-License-Identifier: MIT
// A multi-threaded program whose libc calls are known: kThreads threads,
// each calling getppid, getuid, labs, write (to /dev/null), malloc and
// free kIterations times, between the threads' start and join. The syscall
// wrappers and labs are called by nothing else in libc, so their counts
// are exact by construction; malloc and free are checked against the
// kernel's uprobes where it allows them (libc_workload.py).
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { kThreads = 4, kIterations = 20000 };

static int g_devnull;
// Through a pointer: the compiler would inline its builtin.
static long (*volatile g_labs)(long) = labs;

static void* work(void* arg) {
  (void)arg;
  for (int i = 0; i < kIterations; ++i) {
    (void)getppid();
    (void)getuid();
    if (g_labs(-i) != i) abort();
    (void)!write(g_devnull, "x", 1);
    void* volatile block = malloc(64);  // volatile: the pair is not optimised away
    free(block);
  }
  return NULL;
}

int main(void) {
  g_devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (g_devnull < 0) return 2;
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) pthread_create(&t[i], NULL, work, NULL);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  close(g_devnull);
  return 0;
}
