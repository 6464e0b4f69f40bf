// SPDX-License-Identifier: MIT
// A target for the injector tests: three threads (one blocked in read() on
// stdin, one checking a floating-point computation, main printing a
// deterministic line every 10 ms, --ticks N lines, default 20), plus with
// --hold-lock-ms N a fourth one that holds inject_target_lock for N ms,
// --hold-loader-ms N one that sits N ms in a dl_iterate_phdr callback,
// --churn 1 one that creates and joins threads all the time, --catch-markers N
// handlers for signals an injection could use as its return marker. Prints "start" once every thread
// runs; exits 0 once it has printed its lines and read a byte from stdin.
// Its stdout does not depend on timing, so a traced run must match an
// untraced one byte for byte.
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Looked up by the tests (the program is linked with -rdynamic).
pthread_mutex_t inject_target_lock = PTHREAD_MUTEX_INITIALIZER;
// An injected call's value does not come back (the thread returns through
// rt_sigreturn): the functions the tests call leave it here.
volatile long inject_target_result = 0;
long inject_target_sum6(long a, long b, long c, long d, long e, long f) {
  long r = a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
  inject_target_result = r;
  return r;
}
long inject_target_store_atol(const char* s) {
  inject_target_result = atol(s);
  return inject_target_result;
}
// errno as the thread has it when the call starts; and a call that
// changes it, as dlopen does.
void inject_target_probe_errno(void) { inject_target_result = errno; }
void inject_target_set_errno(long v) { errno = (int)v; }
// Whether the main thread's alternate signal stack is still the one it set.
static char alt_stack_area[64 * 1024];
void inject_target_probe_altstack(void) {
  stack_t now;
  inject_target_result = sigaltstack(NULL, &now) == 0 && now.ss_sp == alt_stack_area &&
                         now.ss_size == sizeof alt_stack_area && !(now.ss_flags & SS_DISABLE);
}

// Counts SIGUSR1 deliveries (the tests check a signal sent during a call
// is delivered after it, once).
// inject_target_usr1_in_wait: whether one arrived inside
// inject_target_wait_ms, i.e. on top of an injected call.
volatile long inject_target_usr1_count = 0;
volatile long inject_target_usr1_in_wait = 0;
static volatile int in_wait;
static void on_usr1(int sig) {
  (void)sig;
  inject_target_usr1_count = inject_target_usr1_count + 1;
  if (in_wait) inject_target_usr1_in_wait = 1;
}

static void sleep_ms(long ms);

// Called by the tests: sleeps ms milliseconds (resuming after signals).
long inject_target_wait_ms(long ms) {
  in_wait = 1;
  sleep_ms(ms);
  in_wait = 0;
  inject_target_result = ms;
  return ms;
}

// Called by the tests: fills every SSE register with ones and resets the
// x87 unit (arm64: every vector register with ones), as library code
// called during an injection may.
void inject_target_clobber_fp(void) {
#if defined(__aarch64__)
  __asm__ volatile(
      "movi v0.2d, #-1\n\tmovi v1.2d, #-1\n\tmovi v2.2d, #-1\n\tmovi v3.2d, #-1\n\t"
      "movi v4.2d, #-1\n\tmovi v5.2d, #-1\n\tmovi v6.2d, #-1\n\tmovi v7.2d, #-1\n\t"
      "movi v16.2d, #-1\n\tmovi v17.2d, #-1\n\tmovi v18.2d, #-1\n\tmovi v19.2d, #-1\n\t"
      "movi v20.2d, #-1\n\tmovi v21.2d, #-1\n\tmovi v22.2d, #-1\n\tmovi v23.2d, #-1"
      ::: "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20",
        "v21", "v22", "v23");
#else
  __asm__ volatile(
      "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1\n\tpcmpeqd %%xmm2, %%xmm2\n\t"
      "pcmpeqd %%xmm3, %%xmm3\n\tpcmpeqd %%xmm4, %%xmm4\n\tpcmpeqd %%xmm5, %%xmm5\n\t"
      "pcmpeqd %%xmm6, %%xmm6\n\tpcmpeqd %%xmm7, %%xmm7\n\tpcmpeqd %%xmm8, %%xmm8\n\t"
      "pcmpeqd %%xmm9, %%xmm9\n\tpcmpeqd %%xmm10, %%xmm10\n\tpcmpeqd %%xmm11, %%xmm11\n\t"
      "pcmpeqd %%xmm12, %%xmm12\n\tpcmpeqd %%xmm13, %%xmm13\n\tpcmpeqd %%xmm14, %%xmm14\n\t"
      "pcmpeqd %%xmm15, %%xmm15\n\tfninit"
      ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
#endif
}

static volatile double fp_seed = 1.0;  // volatile: the work is redone each round
static volatile int fp_stop;
static long fp_rounds;
static char reader_got = '?';
static long hold_lock_ms;
static sem_t lock_taken;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void* reader_main(void* arg) {
  (void)arg;
  char c;
  ssize_t n;
  do n = read(0, &c, 1);
  while (n < 0 && errno == EINTR);
  if (n == 1) reader_got = c;
  return NULL;
}

// SSE (double) and x87 (long double) work whose result must never change.
static double fp_work(long double* x87) {
  double s = 0.0;
  long double l = 0.0L;
  double seed = fp_seed;
  for (int i = 1; i <= 500; ++i) {
    s += seed / ((double)i * i) + sqrt((double)i) * 1e-9;
    l += (long double)seed / ((long double)i * i * i);
  }
  *x87 = l;
  return s;
}

static void* fp_main(void* arg) {
  (void)arg;
  long double ref_l;
  double ref = fp_work(&ref_l);
  while (!fp_stop) {
    long double l;
    double v = fp_work(&l);
    if (v != ref || l != ref_l) {
      fprintf(stderr, "fp mismatch: %.17g != %.17g\n", v, ref);
      _exit(3);
    }
    ++fp_rounds;
  }
  return NULL;
}

// --hold-loader-ms: a thread that sits in a dl_iterate_phdr callback (the
// loader's load-write lock held) for that long: not one to run dlopen on.
static long hold_loader_ms;
volatile long inject_target_loader_holder = 0;  // its thread id, once inside
static int hold_in_callback(struct dl_phdr_info* info, size_t size, void* data) {
  (void)info;
  (void)size;
  (void)data;
  inject_target_loader_holder = gettid();
  sleep_ms(hold_loader_ms);
  return 1;
}
static void* loader_holder_main(void* arg) {
  (void)arg;
  dl_iterate_phdr(hold_in_callback, NULL);
  return NULL;
}

// --churn: threads are created and end all the time.
static volatile int churn_stop;
static void* churn_child(void* arg) { return arg; }
static void* churn_main(void* arg) {
  (void)arg;
  while (!churn_stop) {
    pthread_t t;
    if (pthread_create(&t, NULL, churn_child, NULL) == 0) pthread_join(t, NULL);
  }
  return NULL;
}

static void* holder_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&inject_target_lock);
  sem_post(&lock_taken);
  sleep_ms(hold_lock_ms);
  pthread_mutex_unlock(&inject_target_lock);
  return NULL;
}

// fp_work rounds per computing tick. arm64's long double is software
// (binary128): the arm64 build does fewer, or each tick takes seconds under
// TCG (the kernel leg, tests/kernel).
#ifndef INJECT_TARGET_FP_ROUNDS
#define INJECT_TARGET_FP_ROUNDS 3000
#endif

// --catch-markers N: the program handles the first N of SIGURG, SIGWINCH
// and SIGCHLD, the signals an injected call's return marker is chosen
// from (cli/inject/thread_call.h); its handler counts what reaches it.
volatile long inject_target_caught_markers = 0;
static void on_marker_candidate(int sig) {
  (void)sig;
  inject_target_caught_markers = inject_target_caught_markers + 1;
}

int main(int argc, char** argv) {
  int ticks = 20;
  int churn = 0;
  int catch_markers = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--hold-lock-ms") == 0) hold_lock_ms = atol(argv[i + 1]);
    if (strcmp(argv[i], "--ticks") == 0) ticks = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--hold-loader-ms") == 0) hold_loader_ms = atol(argv[i + 1]);
    if (strcmp(argv[i], "--churn") == 0) churn = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--catch-markers") == 0) catch_markers = atoi(argv[i + 1]);
  }
  const int marker_candidates[] = {SIGURG, SIGWINCH, SIGCHLD};
  for (int i = 0; i < catch_markers && i < 3; ++i) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_marker_candidate;
    sa.sa_flags = SA_RESTART;
    sigaction(marker_candidates[i], &sa, NULL);
  }
  signal(SIGUSR1, on_usr1);
  stack_t alt = {.ss_sp = alt_stack_area, .ss_size = sizeof alt_stack_area, .ss_flags = 0};
  sigaltstack(&alt, NULL);
  pthread_t reader, fp, holder;
  sem_init(&lock_taken, 0, 0);
  pthread_create(&reader, NULL, reader_main, NULL);
  pthread_create(&fp, NULL, fp_main, NULL);
  if (hold_lock_ms > 0) {
    pthread_create(&holder, NULL, holder_main, NULL);
    while (sem_wait(&lock_taken) != 0) {
    }
  }
  pthread_t loader_holder, churner;
  if (hold_loader_ms > 0) {
    pthread_create(&loader_holder, NULL, loader_holder_main, NULL);
    while (inject_target_loader_holder == 0) sleep_ms(1);
  }
  if (churn) pthread_create(&churner, NULL, churn_main, NULL);
  printf("start\n");
  fflush(stdout);
  unsigned long checksum = 1;
  long double ref_l;
  double ref = fp_work(&ref_l);
  for (int k = 0; k < ticks; ++k) {
    // Odd ticks sleep (an injection finds main in a syscall), even ones
    // compute with live SSE and x87 registers (it finds main computing).
    if (k % 2 == 1) {
      sleep_ms(10);
    } else {
      for (int j = 0; j < INJECT_TARGET_FP_ROUNDS; ++j) {
        long double l;
        double v = fp_work(&l);
        if (v != ref || l != ref_l) {
          fprintf(stderr, "fp mismatch in main: %.17g != %.17g\n", v, ref);
          _exit(3);
        }
      }
    }
    for (int i = 0; i < 1000; ++i) checksum = checksum * 6364136223846793005UL + 1442695040888963407UL;
    printf("tick %d %lx\n", k, checksum);
    fflush(stdout);
  }
  pthread_join(reader, NULL);
  fp_stop = 1;
  pthread_join(fp, NULL);
  if (hold_lock_ms > 0) pthread_join(holder, NULL);
  if (hold_loader_ms > 0) pthread_join(loader_holder, NULL);
  if (churn) {
    churn_stop = 1;
    pthread_join(churner, NULL);
  }
  printf("reader got %c\nfp %s\ndone\n", reader_got, fp_rounds > 0 ? "ran" : "idle");
  return 0;
}
