// SPDX-License-Identifier: MIT
// The target of the agent end-to-end tests (e2e.sh/agent_e2e.py): a plain
// program built with -fpatchable-function-entry, driven line by line on
// stdin so that the tests never sleep to synchronise. Its stdout depends
// only on its input, never on timing, so a traced run must print what an
// untraced one prints, byte for byte.
//
//   agent_target [SPINNERS]        SPINNERS threads call spin_step in a loop
//
// Commands (one per line on stdin; each answered by one line on stdout):
//   call N          fn_alpha N times, fn_beta 2N, fn_gamma 3N ("called N SUM")
//   block           a thread enters fn_block, which blocks in read() on a pipe
//                   ("blocked", printed from inside fn_block; the next
//                   command is read once it is printed)
//   unblock         feeds that pipe; the thread returns ("unblocked V")
//   dlopen PATH N   loads PATH, calls its dl_one N times and dl_two 2N times
//                   ("dlopened SUM")
//   ignore-sigint   SIGINT is ignored from now on ("ignoring")
//   exit CODE       stops the spinners, prints "done SUM", exits with CODE
// End of input is "exit 0".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACED __attribute__((noinline, noipa))
#define UNTRACED __attribute__((noinline, patchable_function_entry(0, 0)))

static atomic_long sink;  // keeps the spinning alive; the value is never read

TRACED long fn_alpha(long x) { return (long)((unsigned long)x * 3 + 1); }
TRACED long fn_beta(long x) { return (x ^ 0x5a5a) + 7; }
TRACED long fn_gamma(long x) { return x % 1000 + 11; }
TRACED long spin_step(long x) { return (long)((unsigned long)x * 2654435761UL + 1); }

static int block_pipe[2];
static sem_t block_entered;
TRACED long fn_block(void) {
  printf("blocked\n");
  fflush(stdout);
  sem_post(&block_entered);
  char c = 0;
  while (read(block_pipe[0], &c, 1) != 1) {
  }
  return c;
}

static atomic_int stop;
UNTRACED static void* spinner(void* arg) {
  long v = (long)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) v = spin_step(v);
    atomic_store_explicit(&sink, v, memory_order_relaxed);
  }
  return NULL;
}

static pthread_t blocker_thread;
static int blocker_started;
UNTRACED static void* blocker(void* arg) {
  (void)arg;
  long v = fn_block();
  printf("unblocked %ld\n", v);
  fflush(stdout);
  return NULL;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int spinners = argc > 1 ? atoi(argv[1]) : 0;
  pthread_t threads[16];
  if (spinners > 16) spinners = 16;
  if (pipe(block_pipe) != 0 || sem_init(&block_entered, 0, 0) != 0) return 100;
  for (int i = 0; i < spinners; ++i) pthread_create(&threads[i], NULL, spinner, (void*)(long)i);
  printf("ready\n");
  unsigned long total = 0;
  char line[4096];
  int code = 0;
  while (fgets(line, sizeof line, stdin) != NULL) {
    long n = 0;
    char path[4096];
    if (sscanf(line, "call %ld", &n) == 1) {
      unsigned long sum = 0;
      for (long i = 0; i < n; ++i) sum += fn_alpha(i);
      for (long i = 0; i < 2 * n; ++i) sum += fn_beta(i);
      for (long i = 0; i < 3 * n; ++i) sum += fn_gamma(i);
      total += sum;
      printf("called %ld %lu\n", n, sum);
    } else if (strncmp(line, "block", 5) == 0) {
      blocker_started = 1;
      pthread_create(&blocker_thread, NULL, blocker, NULL);
      while (sem_wait(&block_entered) != 0) {
      }
    } else if (strncmp(line, "unblock", 7) == 0) {
      if (write(block_pipe[1], "*", 1) != 1) return 101;
      pthread_join(blocker_thread, NULL);
      blocker_started = 0;
    } else if (sscanf(line, "dlopen %4095s %ld", path, &n) == 2) {
      void* h = dlopen(path, RTLD_NOW);
      if (h == NULL) {
        printf("dlopen failed: %s\n", dlerror());
        return 102;
      }
      long (*one)(long) = (long (*)(long))dlsym(h, "dl_one");
      long (*two)(long) = (long (*)(long))dlsym(h, "dl_two");
      if (one == NULL || two == NULL) return 103;
      unsigned long sum = 0;
      for (long i = 0; i < n; ++i) sum += one(i);
      for (long i = 0; i < 2 * n; ++i) sum += two(i);
      total += sum;
      printf("dlopened %lu\n", sum);
    } else if (strncmp(line, "ignore-sigint", 13) == 0) {
      signal(SIGINT, SIG_IGN);
      printf("ignoring\n");
    } else if (sscanf(line, "exec %4095s", path) == 1) {
      execl(path, path, "60", (char*)NULL);  /* /bin/sleep 60, say */
      printf("exec failed\n");
      return 106;
    } else if (sscanf(line, "exit %d", &code) == 1) {
      break;
    } else {
      printf("unknown command: %s", line);
      return 104;
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < spinners; ++i) pthread_join(threads[i], NULL);
  if (blocker_started) return 105;
  printf("done %lu\n", total);
  return code;
}
