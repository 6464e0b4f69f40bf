/* SPDX-License-Identifier: MIT */
/* A test plugin that uses every host service it can check: it counts entries
 * (and, built with HOSTTEST_WITH_EXIT, exits) in thread storage, sends one
 * event per entry through the buffers, counts the consumed events per
 * function and per thread, and reports all of it, with its options, as tsv
 * or text. Built with HOSTTEST_WITH_RUN, it takes its events through
 * consume_run and reports the runs too. Written against plugin.h only, like
 * any out-of-tree plugin. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ftjit/plugin.h"

#define MAX_INSTANCES 8
#define MAX_FUNCS 32
#define MAX_THREADS 64

struct per_thread {
  uint64_t entries;
  uint64_t exits;
  uint64_t unwound;
};

struct event {
  uint64_t ip;
  int32_t tid;
  uint32_t depth;
  uint64_t seq; /* the thread's entries before this one: order and which */
};

struct func_count {
  uint64_t ip;
  uint64_t n;
};

struct thread_count {
  int32_t tid;
  uint64_t n;
  uint64_t mismatched; /* events whose tid is not the thread's */
  uint64_t disordered; /* events whose seq is not above the one before */
  uint64_t first_seq, last_seq;
};

/* plugin.h gives no per-instance pointer, so instances are found by ctx. */
struct instance {
  ftjit_plugin_ctx *ctx;
  struct func_count funcs[MAX_FUNCS];
  struct thread_count threads[MAX_THREADS];
  uint64_t single;     /* events handed through consume() */
  uint64_t runs;       /* calls of consume_run() */
  uint64_t run_events; /* events handed through it */
  uint64_t run_bad;    /* runs of no event or of another stride */
};

static const ftjit_host *host;
static struct instance instances[MAX_INSTANCES];

static struct instance *find(ftjit_plugin_ctx *ctx) {
  for (int i = 0; i < MAX_INSTANCES; ++i) {
    if (instances[i].ctx == ctx) return &instances[i];
  }
  return NULL;
}

static void mark(ftjit_plugin_ctx *ctx, const char *what) {
  const char *path = host->option_string(ctx, "marker");
  if (path[0] == '\0') return;
  FILE *f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%s\n", what);
  fclose(f);
}

static int on_init(ftjit_plugin_ctx *ctx) {
  if (host->option_int(ctx, "top") < 0) {
    host->set_error(ctx, "top must be >= 0, got %" PRId64, host->option_int(ctx, "top"));
    return 1;
  }
  for (int i = 0; i < MAX_INSTANCES; ++i) {
    if (instances[i].ctx == NULL) {
      memset(&instances[i], 0, sizeof instances[i]);
      instances[i].ctx = ctx;
      mark(ctx, "init");
      return 0;
    }
  }
  host->set_error(ctx, "more than %d instances", MAX_INSTANCES);
  return 1;
}

static void on_shutdown(ftjit_plugin_ctx *ctx) {
  mark(ctx, "shutdown");
  struct instance *in = find(ctx);
  if (in != NULL) in->ctx = NULL;
}

static void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                     ftjit_plugin_regs *regs) {
  (void)parent_ip;
  (void)regs;
  struct per_thread *t = host->thread_storage(ctx);
  uint64_t seq = 0;
  if (t != NULL) seq = t->entries++;
  struct event *e = host->event_reserve(ctx);
  if (e != NULL) {
    e->ip = ip;
    e->tid = host->thread_id();
    e->depth = host->call_depth();
    e->seq = seq;
    host->event_commit(ctx);
  }
}

#ifdef HOSTTEST_WITH_EXIT
static void on_exit_hook(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                         const ftjit_plugin_ret *ret) {
  (void)ip;
  (void)parent_ip;
  struct per_thread *t = host->thread_storage(ctx);
  if (t == NULL) return;
  if (ret != NULL) {
    t->exits++;
  } else {
    t->unwound++;
  }
}
#endif

static void count_event(ftjit_plugin_ctx *ctx, struct instance *in,
                        const ftjit_thread_info *thread, const struct event *e) {
  /* A writer that stalls: the first event of the session (stall_ms), or
   * every one (consume_us). */
  int64_t stall_ms = host->option_int(ctx, "stall_ms");
  if (stall_ms > 0 && in->threads[0].n == 0) usleep((useconds_t)stall_ms * 1000);
  int64_t consume_us = host->option_int(ctx, "consume_us");
  if (consume_us > 0) usleep((useconds_t)consume_us);
  for (int i = 0; i < MAX_FUNCS; ++i) {
    if (in->funcs[i].ip == e->ip || in->funcs[i].ip == 0) {
      in->funcs[i].ip = e->ip;
      in->funcs[i].n++;
      break;
    }
  }
  for (int i = 0; i < MAX_THREADS; ++i) {
    if (in->threads[i].tid == thread->tid || in->threads[i].tid == 0) {
      struct thread_count *tc = &in->threads[i];
      if (tc->tid == 0) tc->first_seq = e->seq;
      else if (e->seq <= tc->last_seq) tc->disordered++;
      tc->tid = thread->tid;
      tc->n++;
      tc->last_seq = e->seq;
      if (e->tid != thread->tid) tc->mismatched++;
      break;
    }
  }
}

static void on_consume(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                       const void *event) {
  struct instance *in = find(ctx);
  if (in == NULL) return;
  in->single++;
  count_event(ctx, in, thread, event);
}

#ifdef HOSTTEST_WITH_RUN
static void on_consume_run(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                           const void *events, size_t n, size_t stride) {
  struct instance *in = find(ctx);
  if (in == NULL) return;
  in->runs++;
  if (n == 0 || stride != sizeof(struct event)) in->run_bad++;
  for (size_t i = 0; i < n; ++i) {
    count_event(ctx, in, thread, (const struct event *)((const char *)events + i * stride));
  }
  in->run_events += n;
}
#endif

struct visit {
  FILE *out;
  int tsv;
};

static void print_thread(const ftjit_thread_info *thread, void *storage, void *arg) {
  const struct visit *v = arg;
  const struct per_thread *t = storage;
  fprintf(v->out,
          v->tsv ? "thread\t%d\t%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n"
                 : "thread %d (%s): %" PRIu64 " entries, %" PRIu64 " exits, %" PRIu64
                   " unwound, %" PRIu64 " dropped\n",
          thread->tid, thread->name, t->entries, t->exits, t->unwound, thread->events_dropped);
}

static int on_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  struct instance *in = find(ctx);
  if (in == NULL) return 1;
  if (host->option_bool(ctx, "fail_report")) {
    host->set_error(ctx, "asked to fail (fail_report)");
    return 1;
  }
  int tsv = strcmp(format, "tsv") == 0;
  if (strcmp(format, host->format(ctx)) != 0 || host->output(ctx) != out) {
    host->set_error(ctx, "report got another format or stream than the host services say");
    return 1;
  }
  for (int i = 0; i < MAX_FUNCS && in->funcs[i].ip != 0; ++i) {
    const char *name = host->symbol(ctx, in->funcs[i].ip);
    fprintf(out, tsv ? "fn\t%s\t%" PRIu64 "\n" : "%s called %" PRIu64 " times\n",
            name ? name : "?", in->funcs[i].n);
  }
  for (int i = 0; i < MAX_THREADS && in->threads[i].tid != 0; ++i) {
    const struct thread_count *tc = &in->threads[i];
    fprintf(out,
            tsv ? "consumed\t%d\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n"
                : "consumed from %d: %" PRIu64 " (%" PRIu64 " mismatched, %" PRIu64
                  " out of order, seq %" PRIu64 "..%" PRIu64 ")\n",
            tc->tid, tc->n, tc->mismatched, tc->disordered, tc->first_seq, tc->last_seq);
  }
#ifdef HOSTTEST_WITH_RUN
  fprintf(out, tsv ? "runs\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n"
                   : "runs: %" PRIu64 " of %" PRIu64 " events (%" PRIu64 " bad), %" PRIu64
                     " events one at a time\n",
          in->runs, in->run_events, in->run_bad, in->single);
#endif
  struct visit v = {out, tsv};
  host->for_each_thread(ctx, print_thread, &v);
  uint64_t recursion = 0, events = 0;
  host->drop_counts(ctx, &recursion, &events);
  fprintf(out, tsv ? "drops\t%" PRIu64 "\t%" PRIu64 "\n"
                   : "drops: %" PRIu64 " recursion, %" PRIu64 " events\n",
          recursion, events);
  fprintf(out, tsv ? "opt\t%" PRId64 "\t%.3f\t%d\t%s\n" : "options: %" PRId64 " %.3f %d %s\n",
          host->option_int(ctx, "top"), host->option_double(ctx, "ratio"),
          host->option_bool(ctx, "verbose"), host->option_string(ctx, "label"));
  /* Asking with the wrong type or an unknown name must give the zero value. */
  fprintf(out, tsv ? "wrongtype\t%" PRId64 "\t%d\t%s|\n" : "wrong type: %" PRId64 " %d %s|\n",
          host->option_int(ctx, "label"), host->option_bool(ctx, "nosuch"),
          host->option_string(ctx, "top"));
  return 0;
}

static const ftjit_plugin_option options[] = {
    {"top", FTJIT_OPTION_INT, "10", "an integer"},
    {"ratio", FTJIT_OPTION_DOUBLE, "0.5", "a double"},
    {"verbose", FTJIT_OPTION_BOOL, NULL, "a bool defaulting to false"},
    {"label", FTJIT_OPTION_STRING, "none", "a string"},
    {"marker", FTJIT_OPTION_STRING, NULL, "file that init and shutdown append to"},
    {"fail_report", FTJIT_OPTION_BOOL, "no", "make report fail"},
    {"stall_ms", FTJIT_OPTION_INT, "0", "consume() sleeps this long at the first event"},
    {"consume_us", FTJIT_OPTION_INT, "0", "consume() sleeps this long at every event"},
};

static const char *const formats[] = {"text", "tsv", NULL};

static const ftjit_plugin descriptor = {
    .struct_size = sizeof(ftjit_plugin),
    .abi_version = FTJIT_PLUGIN_ABI_VERSION,
#ifdef HOSTTEST_WITH_EXIT
    .name = "hostexit",
    .description = "host test plugin: counts entries and exits",
#elif defined(HOSTTEST_WITH_RUN)
    .name = "hostrun",
    .description = "host test plugin: counts entries, consumed in runs",
#else
    .name = "hostgood",
    .description = "host test plugin: counts entries",
#endif
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .formats = formats,
    .thread_storage_size = sizeof(struct per_thread),
    .event_size = sizeof(struct event),
    .init = on_init,
    .shutdown = on_shutdown,
    .entry = on_entry,
#ifdef HOSTTEST_WITH_EXIT
    .exit = on_exit_hook,
#endif
    .consume = on_consume,
    .report = on_report,
#ifdef HOSTTEST_WITH_RUN
    .consume_run = on_consume_run,
#endif
};

FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(const ftjit_host *h) {
  host = h;
  return &descriptor;
}
