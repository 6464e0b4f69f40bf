/* SPDX-License-Identifier: MIT */
/* Self-tracing harness: attaches one ops with an entry and an exit callback
 * to every site of the executable and checks, per thread, that entries and
 * exits pair LIFO with the same ip and parent_ip, that every entry gets
 * exactly one exit, and that nothing is left on the stack of a thread that
 * finished. The summary goes to stderr so that the program's stdout can be
 * compared byte for byte with an untraced run.
 *
 * This file is not built with -fpatchable-function-entry: the callbacks and
 * the harness must never be traced themselves. The callbacks do not
 * allocate, lock or call traced code; they may run inside signal handlers
 * and while the unwinder is working. */
#define _GNU_SOURCE
#include "tests/exit_hooks/selftrace.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ftjit/ftjit.h"

/* Deeper than any program goes (recursion.c: 100000 frames). */
#define ST_CAP (1u << 18)

typedef struct frame {
  uint64_t ip;
  uint64_t parent_ip;
} frame;

/* Per thread. The stack is mapped on the thread's first traced entry: a
 * fixed __thread array this deep would be carved out of every thread's
 * stack by glibc (TLS lives there) and zeroed at each pthread_create.
 * mmap/munmap are async-signal-safe (a first entry may be in a signal
 * handler) and go through the sanitizers' interceptors on purpose: TSan
 * must forget a dead thread's stack when the next thread gets the same
 * pages. */
static __thread frame *t_stack;
static __thread uint32_t t_depth;   /* may exceed ST_CAP: see overflow */
static __thread uint32_t t_max;
static __thread int t_dtor_rounds;

static atomic_uint_fast64_t g_entries, g_exits, g_unwound;
static atomic_uint_fast64_t g_mismatches, g_leftover, g_overflow, g_threads;
static atomic_uint_fast64_t g_map_failures;
static atomic_uint g_max_depth;
/* Engine shadow depth minus ours, sampled at each entry: a constant when
 * the engine's shadow stack and the exits it reports agree with ours. */
static atomic_int g_skew_min = INT_MAX, g_skew_max = INT_MIN;

/* The first mismatch, for the report. */
static atomic_int g_first_claimed;
static struct {
  uint64_t ip, parent_ip, top_ip, top_parent_ip;
  uint32_t depth;
  int unwound;
  pid_t tid;
} g_first;

static ftjit_engine *g_engine;
static ftjit_ops g_ops;
static int g_entry_only;
static int g_attached;
static int g_done;
static pid_t g_owner;
static const char *g_strategy_name = "";
static pthread_key_t g_key;
static long g_sites;

static void atomic_max_u(atomic_uint *a, uint32_t v) {
  unsigned cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v > cur &&
         !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static void atomic_min_i(atomic_int *a, int v) {
  int cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v < cur &&
         !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static void atomic_max_i(atomic_int *a, int v) {
  int cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v > cur &&
         !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static void relaxed_inc(atomic_uint_fast64_t *a, uint64_t n) {
  atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

static void record_mismatch(uint64_t ip, uint64_t parent_ip, const frame *top, int unwound) {
  relaxed_inc(&g_mismatches, 1);
  int expected = 0;
  if (atomic_compare_exchange_strong(&g_first_claimed, &expected, 1)) {
    g_first.ip = ip;
    g_first.parent_ip = parent_ip;
    g_first.top_ip = top ? top->ip : 0;
    g_first.top_parent_ip = top ? top->parent_ip : 0;
    g_first.depth = t_depth;
    g_first.unwound = unwound;
    g_first.tid = (pid_t)syscall(SYS_gettid);
  }
}

static void unmap_stack(void) {
  if (t_stack) munmap(t_stack, (size_t)ST_CAP * sizeof(frame));
  t_stack = NULL;
}

/* Thread exit (pthread key destructor, after C++ thread_local destructors).
 * Entries still open may legitimately get their unwound exits from another
 * destructor of this round (the engine's own thread cleanup), so an open
 * stack is only counted as left over in the last round glibc grants. */
static void thread_done(void *unused) {
  (void)unused;
  if (t_depth != 0 && ++t_dtor_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(g_key, (void *)1);
    return;
  }
  relaxed_inc(&g_leftover, t_depth);
  t_depth = 0;
  unmap_stack();
}

static int thread_init(void) {
  void *p = mmap(NULL, (size_t)ST_CAP * sizeof(frame), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    relaxed_inc(&g_map_failures, 1);
    return 0;
  }
  t_stack = (frame *)p;
  t_dtor_rounds = 0;
  relaxed_inc(&g_threads, 1);
  /* The key was made at startup, so its index is small and glibc stores
   * the value in the thread descriptor without allocating. */
  pthread_setspecific(g_key, (void *)1);
  return 1;
}

static void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops *ops, ftjit_regs *regs) {
  (void)ops;
  (void)regs;
  relaxed_inc(&g_entries, 1);
  if (g_entry_only) return;
  if (t_stack == NULL && !thread_init()) return;
  int skew = (int)ftjit_shadow_depth() - (int)t_depth;
  atomic_min_i(&g_skew_min, skew);
  atomic_max_i(&g_skew_max, skew);
  if (t_depth < ST_CAP) {
    t_stack[t_depth].ip = ip;
    t_stack[t_depth].parent_ip = parent_ip;
  } else {
    relaxed_inc(&g_overflow, 1);
  }
  ++t_depth;
  if (t_depth > t_max) {
    t_max = t_depth;
    atomic_max_u(&g_max_depth, t_max);
  }
}

static void on_exit_cb(uint64_t ip, uint64_t parent_ip, ftjit_ops *ops, ftjit_ret_regs *ret) {
  (void)ops;
  relaxed_inc(&g_exits, 1);
  if (ret == NULL) relaxed_inc(&g_unwound, 1);
  if (t_stack == NULL || t_depth == 0) {
    record_mismatch(ip, parent_ip, NULL, ret == NULL);
    return;
  }
  --t_depth;
  if (t_depth >= ST_CAP) return;
  const frame *top = &t_stack[t_depth];
  if (top->ip != ip || top->parent_ip != parent_ip) record_mismatch(ip, parent_ip, top, ret == NULL);
}

static void die(const char *what) {
  fprintf(stderr, "selftrace: error: %s: %s\n", what, ftjit_last_error());
  fflush(stderr);
  _exit(97);
}

static ftjit_strategy parse_strategy(const char *s) {
  if (strcmp(s, "generated") == 0) return FTJIT_STRATEGY_GENERATED;
  if (strcmp(s, "call-ops") == 0) return FTJIT_STRATEGY_CALL_OPS;
  if (strcmp(s, "list") == 0) return FTJIT_STRATEGY_LIST;
  if (strcmp(s, "auto") == 0) return FTJIT_STRATEGY_AUTO;
  fprintf(stderr, "selftrace: error: FTJIT_SELFTRACE=%s is not generated, call-ops, list or auto\n",
          s);
  _exit(97);
}

void selftrace_begin(void) {
  const char *mode = getenv("FTJIT_SELFTRACE");
  if (mode == NULL || *mode == '\0' || g_engine != NULL) return;
  ftjit_strategy strategy = parse_strategy(mode);
  g_strategy_name = mode;
  const char *eo = getenv("FTJIT_SELFTRACE_ENTRY_ONLY");
  g_entry_only = eo != NULL && *eo != '\0' && strcmp(eo, "0") != 0;
  g_owner = getpid();
  if (pthread_key_create(&g_key, thread_done) != 0) die("pthread_key_create");

  /* The executable's own sites only: the module glob is its basename. */
  static char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) die("readlink /proc/self/exe");
  exe[n] = '\0';
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  static char inc_all[PATH_MAX + 8], exc_main[PATH_MAX + 8], exc_self[PATH_MAX + 16];
  snprintf(inc_all, sizeof inc_all, "%s!*", base);
  snprintf(exc_main, sizeof exc_main, "%s!main", base);
  snprintf(exc_self, sizeof exc_self, "%s!selftrace_*", base);
  static const char *include[1], *exclude[2];
  include[0] = inc_all;
  exclude[0] = exc_main;
  exclude[1] = exc_self;
  ftjit_filter filter = {include, 1, exclude, 2};

  ftjit_engine_options opts;
  ftjit_engine_options_init(&opts);
  opts.default_strategy = strategy;
  g_engine = ftjit_engine_create(&opts);
  if (g_engine == NULL) die("ftjit_engine_create");
  ftjit_ops_init(&g_ops);
  g_ops.func = on_entry;
  g_ops.exit_func = g_entry_only ? NULL : on_exit_cb;
  g_ops.strategy = strategy;
  ftjit_status st = ftjit_attach(g_engine, &g_ops, &filter);
  if (st != FTJIT_OK) die("ftjit_attach");
  g_attached = 1;
  g_sites = ftjit_ops_site_count(g_engine, &g_ops);
  atexit(selftrace_end);
}

static uint64_t load(atomic_uint_fast64_t *a) {
  return atomic_load_explicit(a, memory_order_relaxed);
}

static const char *site_name(uint64_t ip) {
  const char *s = ip ? ftjit_site_name(g_engine, ip) : NULL;
  return s ? s : "?";
}

void selftrace_end(void) {
  if (g_engine == NULL || g_done) return;
  g_done = 1;
  int child = getpid() != g_owner;
  /* A forked child's engine is inert (it may not patch); its sites stay
   * traced by the inherited trampolines, which keep calling us. */
  if (!child && g_attached) {
    if (ftjit_detach(g_engine, &g_ops) != FTJIT_OK) die("ftjit_detach");
    g_attached = 0;
  }
  /* This thread's own open entries: main has returned (or is about to
   * _exit from main), so there must be none. */
  if (!g_entry_only) {
    relaxed_inc(&g_leftover, t_depth);
  }
  ftjit_stats stats;
  ftjit_get_stats(g_engine, &stats);
  int smin = atomic_load(&g_skew_min), smax = atomic_load(&g_skew_max);
  if (smin > smax) smin = smax = 0;
  fprintf(stderr,
          "%sselftrace: strategy=%s mode=%s sites=%ld entries=%llu exits=%llu unwound=%llu "
          "max_depth=%u mismatches=%llu leftover=%llu overflow=%llu threads=%llu "
          "map_failures=%llu skew=%d..%d engine_depth=%u hooks=%llu frames_unwound=%llu "
          "recursion_drops=%llu exit_hook_drops=%llu\n",
          child ? "child " : "", g_strategy_name, g_entry_only ? "entry" : "exit", g_sites,
          (unsigned long long)load(&g_entries), (unsigned long long)load(&g_exits),
          (unsigned long long)load(&g_unwound), atomic_load(&g_max_depth),
          (unsigned long long)load(&g_mismatches), (unsigned long long)load(&g_leftover),
          (unsigned long long)load(&g_overflow), (unsigned long long)load(&g_threads),
          (unsigned long long)load(&g_map_failures), smin, smax, ftjit_shadow_depth(),
          (unsigned long long)stats.exit_hooks, (unsigned long long)stats.frames_unwound,
          (unsigned long long)stats.recursion_drops, (unsigned long long)stats.exit_hook_drops);
  if (atomic_load(&g_first_claimed)) {
    fprintf(stderr,
            "%sselftrace: first mismatch: tid=%d exit%s of %s (ip=%#llx parent=%#llx) at depth "
            "%u, top of stack %s (ip=%#llx parent=%#llx)\n",
            child ? "child " : "", (int)g_first.tid, g_first.unwound ? "(unwound)" : "",
            site_name(g_first.ip), (unsigned long long)g_first.ip,
            (unsigned long long)g_first.parent_ip, g_first.depth, site_name(g_first.top_ip),
            (unsigned long long)g_first.top_ip, (unsigned long long)g_first.top_parent_ip);
  }
  fflush(stderr);
  ftjit_engine_destroy(g_engine);
  /* A child's sites still call us after this (the inert engine leaves its
   * trampolines in place); the counters and stacks stay valid for that. */
}
