/* SPDX-License-Identifier: MIT */
/* The live-control target: four worker threads call lt_a and lt_b in
 * batches the test asks for on stdin ("batch K": each worker calls lt_a
 * K times and lt_b 2K times; then "done K" on stdout), while two noise
 * threads call lt_c without pause, so that every control change (pause,
 * resume, a filter that patches and unpatches lt_c) lands among calls.
 * "quit" ends it, printing the noise calls made. Only live_traced.c has
 * patchable entries. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void lt_a(int);
void lt_b(int);
void lt_c(int);

#define WORKERS 4
#define NOISE 2

static pthread_barrier_t start, finish;
static int batch;
static atomic_int stop;
static atomic_long noise_calls;

static void* worker(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "lt-worker");
  for (;;) {
    pthread_barrier_wait(&start);
    const int k = batch;
    if (k < 0) return NULL;
    for (int i = 0; i < k; ++i) lt_a(i);
    for (int i = 0; i < 2 * k; ++i) lt_b(i);
    pthread_barrier_wait(&finish);
  }
}

static void* noise(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "lt-noise");
  long n = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    lt_c((int)n);
    /* A pause now and then: two spinning threads on a loaded 2-core
     * machine would starve the test's own control commands. */
    if (++n % 4096 == 0) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  atomic_fetch_add(&noise_calls, n);
  return NULL;
}

int main(void) {
  pthread_barrier_init(&start, NULL, WORKERS + 1);
  pthread_barrier_init(&finish, NULL, WORKERS + 1);
  pthread_t w[WORKERS], z[NOISE];
  for (int i = 0; i < WORKERS; ++i) pthread_create(&w[i], NULL, worker, NULL);
  for (int i = 0; i < NOISE; ++i) pthread_create(&z[i], NULL, noise, NULL);
  printf("ready\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin) != NULL) {
    int k = 0;
    if (sscanf(line, "batch %d", &k) == 1 && k > 0) {
      batch = k;
      pthread_barrier_wait(&start);
      pthread_barrier_wait(&finish);
      printf("done %d\n", k);
      fflush(stdout);
    } else if (strncmp(line, "quit", 4) == 0) {
      break;
    }
  }
  batch = -1;
  pthread_barrier_wait(&start);
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; ++i) pthread_join(w[i], NULL);
  for (int i = 0; i < NOISE; ++i) pthread_join(z[i], NULL);
  printf("noise %ld\n", atomic_load(&noise_calls));
  return 0;
}
