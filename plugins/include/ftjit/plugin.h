/* SPDX-License-Identifier: MIT */
/* ftjit tracer plugin SDK: the one header a tracer plugin is compiled
 * against. It needs nothing else of ftjit; the host (the `ftjit` CLI, the
 * agent, or any program embedding libftjit) loads the plugin with dlopen.
 *
 * A plugin is a shared object exporting one function,
 *
 *     const ftjit_plugin *ftjit_plugin_v1(const ftjit_host *host);
 *
 * which returns a static descriptor: the plugin's name, its options, and
 * its callbacks. The host checks abi_version and struct_size before it uses
 * anything else, and refuses a plugin whose ABI it does not speak.
 *
 * Life of a plugin instance (a plugin may be loaded more than once, each
 * instance with its own ctx and options):
 *
 *   load      ftjit_plugin_v1(host), options parsed and type-checked
 *   init      init(ctx): open files, size tables; nonzero = refused
 *   tracing   entry(...) / exit(...) on the traced threads;
 *             consume(...) on the host's writer thread, for each event the
 *             plugin put in a per-thread buffer
 *   detach    the host stops tracing and drains every buffer
 *   report    report(ctx, out, format): the plugin's result
 *   shutdown  shutdown(ctx)
 *
 * Inline work: instead of (or before) a C call per traced call, a plugin
 * may describe simple per-call work as data (ftjit_plugin_inline below),
 * which the host compiles into the code every traced site calls. It costs
 * what a few instructions cost; the callback stays for what the host does
 * not compile.
 *
 * The event path (entry, exit) runs inside the traced function. It must not
 * block, lock, allocate or throw: use the per-thread storage and the
 * per-thread event buffers the host gives. Traced functions called from a
 * callback run untraced (the host's reentrancy guard counts them). */
#ifndef FTJIT_PLUGIN_H
#define FTJIT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change; struct_size fields allow appending. */
#define FTJIT_PLUGIN_ABI_VERSION 1
#define FTJIT_PLUGIN_ENTRY_SYMBOL "ftjit_plugin_v1"

#if defined(__GNUC__)
#define FTJIT_PLUGIN_EXPORT __attribute__((visibility("default")))
#define FTJIT_PLUGIN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define FTJIT_PLUGIN_EXPORT
#define FTJIT_PLUGIN_PRINTF(f, a)
#endif

/* One plugin instance. Opaque: the host owns it. */
typedef struct ftjit_plugin_ctx ftjit_plugin_ctx;

/* Registers at a traced function's entry. A callback may change arg[]; the
 * function sees the new values. The host's record; do not copy the struct.
 *   arg[]  the integer argument registers: x86-64 rdi rsi rdx rcx r8 r9
 *          (then rax r10), arm64 x0-x7, riscv64 a0-a7
 *   sp     the stack pointer at the function's first instruction (x86-64:
 *          its return address is at sp; stack arguments follow it)
 *   fp[]   the FP argument registers (xmm0-7, v0-7, fa0-fa7: the low bytes
 *          of each 16), saved only when the plugin does not declare
 *          FTJIT_PLUGIN_F_NO_FP or the session captures an FP argument
 *          (args_capture); otherwise not meaningful. */
typedef struct ftjit_plugin_regs {
  uint64_t arg[8];
  uint64_t reserved;
  uint64_t sp;
  uint8_t fp[8][16];
} ftjit_plugin_regs;

/* Return registers of a traced function (x86-64: rax rdx, xmm0 xmm1;
 * arm64: x0 x1, v0 v1; riscv64: a0 a1, fa0 fa1). */
typedef struct ftjit_plugin_ret {
  uint64_t ret[2];
  uint8_t fp[2][16];
} ftjit_plugin_ret;

/* ip: the traced function's entry address; parent_ip: where it returns. */
typedef void (*ftjit_plugin_entry_fn)(uint64_t ip, uint64_t parent_ip,
                                      ftjit_plugin_ctx *ctx,
                                      ftjit_plugin_regs *regs);
/* The same ip and parent_ip as the matching entry. `ret` is NULL when the
 * frame was unwound (exception, longjmp) rather than returned: each entry
 * the plugin saw gets exactly one exit. */
typedef void (*ftjit_plugin_exit_fn)(uint64_t ip, uint64_t parent_ip,
                                     ftjit_plugin_ctx *ctx,
                                     const ftjit_plugin_ret *ret);

typedef enum ftjit_option_type {
  FTJIT_OPTION_BOOL = 1,    /* true/false, yes/no, on/off, 1/0 */
  FTJIT_OPTION_INT = 2,     /* a decimal or 0x integer, int64 */
  FTJIT_OPTION_DOUBLE = 3,
  FTJIT_OPTION_STRING = 4
} ftjit_option_type;

typedef struct ftjit_plugin_option {
  const char *name;           /* [a-z0-9_-]+ */
  ftjit_option_type type;
  const char *default_value;  /* as a user would write it; NULL: false, 0,
                                 0.0 or "" */
  const char *help;           /* one line */
} ftjit_plugin_option;

/* A traced thread, as the host knows it. */
typedef struct ftjit_thread_info {
  int32_t tid;               /* kernel thread id */
  const char *name;          /* comm, as last seen */
  uint64_t events_dropped;   /* events this plugin lost: buffer full */
} ftjit_thread_info;

typedef void (*ftjit_thread_visit_fn)(const ftjit_thread_info *thread,
                                      void *storage, void *arg);

/* One traced function's inline count (FTJIT_PLUGIN_INLINE_COUNT): all
 * threads' calls that ran the compiled work. */
typedef void (*ftjit_inline_count_fn)(uint64_t ip, uint64_t count, void *arg);

/* One traced function's inline latency (FTJIT_PLUGIN_INLINE_LATENCY),
 * merged over threads: the calls that ran the compiled work. */
#define FTJIT_PLUGIN_BUCKETS 65
typedef struct ftjit_plugin_histogram {
  uint64_t ip;
  uint64_t calls;      /* returns timed: the sum of the buckets */
  uint64_t total_ns;
  uint64_t max_ns;
  uint64_t unwound;    /* frames left by an exception or longjmp: not timed */
  uint64_t buckets[FTJIT_PLUGIN_BUCKETS];  /* [0]: 0 ns; [k]: [2^(k-1), 2^k) */
} ftjit_plugin_histogram;
typedef void (*ftjit_plugin_histogram_fn)(const ftjit_plugin_histogram *h, void *arg);

/* Inline work, compiled by the host into the code traced sites call.
 *
 *   FTJIT_PLUGIN_INLINE_COUNT (entry; exit NONE)
 *       The calling thread's counter of the traced function += 1: per-thread
 *       counters, so no lock and no lost count with any number of threads;
 *       read summed over threads with host->inline_counts().
 *   FTJIT_PLUGIN_INLINE_LATENCY (entry and exit both)
 *       At entry the ISA's cycle counter is kept for the exit (on the
 *       host's shadow stack); at the return the duration in ns goes into
 *       the calling thread's log2 histogram of the traced function (calls,
 *       total, max, buckets [0], [1], [2,4) ... as ftjit_plugin_histogram;
 *       frames left by an exception or longjmp are counted as unwound).
 *       Read merged over threads with host->inline_histograms(). The
 *       plugin's `entry` and `exit` time the calls the host does not
 *       compile (and a machine whose cycle counter does not measure
 *       durations), with host->now_ns().
 *
 * The host compiles it where the plugin's instance is the only tracer of a
 * site and nothing else needs the callback there; everywhere else (the
 * list and call-ops strategies, a site shared with another plugin, a
 * thread filter, a thread's first call) `entry` runs instead, as without
 * inline work. So `entry` must do the same work in C, and the report must
 * add both up: see the example below. Inline work runs on every call, also
 * on calls made inside callbacks (it calls nothing, so it cannot recurse).
 *
 * Refused at load, naming the plugin and the cause: a struct_size or
 * version the host does not know, an action it does not know, an action
 * without the callbacks that do its work where it is not compiled (count:
 * `entry`; latency: `entry` and `exit`), an `exit` callback beside count
 * (hooked returns need the callback path at every site), latency at one
 * end only. At attach: an action the ISA's code generator does not
 * compile.
 *
 * Example (count, the whole of it that concerns inline work):
 *
 *     static const ftjit_plugin_inline kInline = {
 *         sizeof(ftjit_plugin_inline), FTJIT_PLUGIN_INLINE_VERSION,
 *         FTJIT_PLUGIN_INLINE_COUNT, FTJIT_PLUGIN_INLINE_NONE};
 *     // descriptor: .entry = count_entry (counts in thread storage),
 *     //             .inline_work = &kInline
 *     static void add(uint64_t ip, uint64_t n, void *table) {
 *       table_add(table, ip, n);
 *     }
 *     // report: the callback's counts, then
 *     if (host->struct_size > offsetof(ftjit_host, inline_counts))
 *       host->inline_counts(ctx, add, &table);
 *
 * Example (latency): {..., FTJIT_PLUGIN_INLINE_LATENCY,
 * FTJIT_PLUGIN_INLINE_LATENCY}, .entry/.exit time calls with now_ns() into
 * the same kind of histograms, and the report merges both:
 *
 *     static void add_hist(const ftjit_plugin_histogram *h, void *table) {
 *       table_merge(table, h->ip, h->calls, h->total_ns, h->max_ns,
 *                   h->buckets);
 *     }
 *     if (host->struct_size > offsetof(ftjit_host, inline_histograms))
 *       host->inline_histograms(ctx, add_hist, &table);
 */
#define FTJIT_PLUGIN_INLINE_VERSION 1
enum {
  FTJIT_PLUGIN_INLINE_NONE = 0,
  FTJIT_PLUGIN_INLINE_COUNT = 1,
  FTJIT_PLUGIN_INLINE_LATENCY = 2
};
typedef struct ftjit_plugin_inline {
  uint32_t struct_size;  /* sizeof(ftjit_plugin_inline) */
  uint32_t version;      /* FTJIT_PLUGIN_INLINE_VERSION */
  uint32_t entry;        /* FTJIT_PLUGIN_INLINE_* run at a traced entry */
  uint32_t exit;         /* at its return: FTJIT_PLUGIN_INLINE_NONE, or
                            _LATENCY with entry _LATENCY */
} ftjit_plugin_inline;

enum { FTJIT_LOG_DEBUG = 0, FTJIT_LOG_INFO = 1, FTJIT_LOG_WARN = 2,
       FTJIT_LOG_ERROR = 3 };

/* Descriptor flags. */
#define FTJIT_PLUGIN_F_NO_FP 0x1u  /* callbacks (entry and exit) never
                                      touch FP/vector registers (compile
                                      them with -mgeneral-regs-only): the
                                      trampolines need not save xmm0-15 */
#define FTJIT_PLUGIN_F_ARGS 0x2u   /* the plugin records arguments and
                                      return values (args_capture): when the
                                      session captures any, the host adds
                                      args_room() bytes to each event */
#define FTJIT_PLUGIN_F_EVERY_CALL 0x4u  /* the plugin counts calls: the
                                      session's sampling (--sample) and
                                      duration filter (--min-duration)
                                      leave its calls alone, so its counts
                                      stay exact (count); depth, pauses and
                                      triggers still apply */

/* Arguments and return values (`ftjit run|attach --args/--retval`): the
 * CLI reads each traced function's parameters from its module's DWARF,
 * the host copies their raw bytes at entry and return into a record (the
 * event path copies words, and strings up to a bound, never formats), and
 * formats a record by type on the writer thread. */
#define FTJIT_ARGS_FILTERED 0xffffffffu  /* args_capture: --when says no */
#define FTJIT_ARGS_HINT_NONE UINT64_MAX  /* args_capture_hint: nothing of
                                            the function is captured */
enum {
  FTJIT_ARG_INT = 1,      /* i */
  FTJIT_ARG_UINT = 2,     /* u */
  FTJIT_ARG_DOUBLE = 3,   /* d */
  FTJIT_ARG_BOOL = 4,     /* u: 0 or 1 */
  FTJIT_ARG_STRING = 5,   /* text: the C string's bytes, quoted and escaped;
                             u: its address */
  FTJIT_ARG_POINTER = 6,  /* u */
  FTJIT_ARG_TEXT = 7      /* text only: an enumerator, a char, a struct's
                             members, <optimised out>, NULL... */
};
typedef struct ftjit_arg_value {
  const char *name;   /* the parameter's; "" for a return value */
  uint32_t type;      /* FTJIT_ARG_* */
  int64_t i;
  uint64_t u;
  double d;
  const char *text;   /* always set: the value as text shows it */
} ftjit_arg_value;
typedef void (*ftjit_arg_visit_fn)(const ftjit_arg_value *value, void *arg);

/* A traced function's parameter, as its DWARF and the psABI give it. */
typedef struct ftjit_param_info {
  const char *name;   /* "argN" when DWARF has none */
  const char *type;   /* as C spells it: "const char *" */
  const char *place;  /* "int arg 0", "stack+8", "<optimised out>" */
  uint32_t size;      /* bytes */
} ftjit_param_info;
typedef void (*ftjit_param_visit_fn)(const ftjit_param_info *param, void *arg);

/* The common capture, made by the plugin's own event path with no call
 * into the host: the host's table of the traced functions whose records
 * are whole words of integer argument registers (at entry) and the first
 * return register (at the return), which is the usual C function of
 * integers and pointers. host->args_fast_table gives it; the helpers below
 * read it and write records byte for byte as args_capture_hint and
 * retval_capture_hint would, and say FTJIT_ARGS_ASK_HOST for every other
 * case (strings, FP or stack arguments, structs, --when conditions),
 * which the plugin then hands to those services.
 *
 * The table: open addressing over ips, at most half full, never written
 * while the session traces. Each slot's word:
 *   bits  0-15  the entry record's size, when it is the common case (else 0)
 *   bits 16-19  how many registers it copies, one word each after the
 *               record's 8-byte header
 *   bits 20-43  which integer registers (arg[]), 3 bits each, first lowest
 *   bit  44     nothing is captured at entry (--retval alone)
 *   bit  45     nothing is captured at the return (a void function)
 *   bit  46     the registers are arg[0], arg[1]... in order
 *   bits 48-63  the return's record size, when it is the common case: the
 *               header, then ret[0]
 * A record's header word: its size, and at bit 16 its kind (1 entry,
 * 2 return). */
#define FTJIT_ARGS_ASK_HOST 0xfffffffeu  /* the helpers: not the common case */
#define FTJIT_ARGS_FAST_NO_ENTRY (UINT64_C(1) << 44)
#define FTJIT_ARGS_FAST_NO_EXIT (UINT64_C(1) << 45)
#define FTJIT_ARGS_FAST_IN_ORDER (UINT64_C(1) << 46)
#if defined(__GNUC__) || defined(__clang__)
#define FTJIT_ARGS_FALLTHROUGH __attribute__((fallthrough))
#else
#define FTJIT_ARGS_FALLTHROUGH
#endif
typedef struct ftjit_args_fast_slot {
  uint64_t ip;    /* 0: empty */
  uint64_t word;  /* as drawn above */
} ftjit_args_fast_slot;
typedef struct ftjit_args_fast_table {
  const ftjit_args_fast_slot *slots;  /* mask + 1 of them */
  uint64_t mask;
  uint32_t room;      /* args_room(): the largest record an event has room for */
  uint32_t reserved;
} ftjit_args_fast_table;

/* [event] The slot of `ip` as a hint (its number + 1, never 0), the same
 * value args_capture_hint gives; FTJIT_ARGS_HINT_NONE when nothing of
 * `ip` is captured. */
static inline uint64_t ftjit_args_fast_find(const ftjit_args_fast_table *t,
                                            uint64_t ip) {
  uint64_t i = (ip * UINT64_C(0x9e3779b97f4a7c15) >> 20) & t->mask;
  for (;;) {
    if (t->slots[i].ip == ip) return i + 1;
    if (t->slots[i].ip == 0) return FTJIT_ARGS_HINT_NONE;
    i = (i + 1) & t->mask;
  }
}

/* [event] The entry record of a call whose slot's word is `word`, in an
 * event with `room` bytes for it, written to `out`: its size, 0 when
 * nothing is captured at entry, or FTJIT_ARGS_ASK_HOST (nothing written:
 * call args_capture_hint). */
static inline uint32_t ftjit_args_fast_entry_word(uint64_t word, uint32_t room,
                                                  const ftjit_plugin_regs *regs,
                                                  void *out) {
  const uint32_t size = (uint32_t)(word & 0xffff);
  if (size == 0 || size > room)
    return (word & FTJIT_ARGS_FAST_NO_ENTRY) != 0 ? 0 : FTJIT_ARGS_ASK_HOST;
  uint64_t *words = (uint64_t *)out;  /* event slots are 8-aligned */
  const uint64_t *arg = regs->arg;
  words[0] = size | UINT64_C(1) << 16;
  const unsigned n = (unsigned)(word >> 16) & 15;
  if ((word & FTJIT_ARGS_FAST_IN_ORDER) != 0) {
    /* The usual order, unrolled: no register numbers to decode (the host
     * sets the bit for at most eight). */
    switch (n) {
      case 8: words[8] = arg[7]; FTJIT_ARGS_FALLTHROUGH;
      case 7: words[7] = arg[6]; FTJIT_ARGS_FALLTHROUGH;
      case 6: words[6] = arg[5]; FTJIT_ARGS_FALLTHROUGH;
      case 5: words[5] = arg[4]; FTJIT_ARGS_FALLTHROUGH;
      case 4: words[4] = arg[3]; FTJIT_ARGS_FALLTHROUGH;
      case 3: words[3] = arg[2]; FTJIT_ARGS_FALLTHROUGH;
      case 2: words[2] = arg[1]; FTJIT_ARGS_FALLTHROUGH;
      case 1: words[1] = arg[0]; FTJIT_ARGS_FALLTHROUGH;
      default: break;
    }
    return size;
  }
  uint64_t regs_of = word >> 20;
  for (unsigned k = 0; k < n; ++k, regs_of >>= 3) words[1 + k] = arg[regs_of & 7];
  return size;
}

/* [event] The same for the call whose slot is `hint` (from
 * ftjit_args_fast_find, not FTJIT_ARGS_HINT_NONE). */
static inline uint32_t ftjit_args_fast_entry(const ftjit_args_fast_table *t,
                                             uint64_t hint,
                                             const ftjit_plugin_regs *regs,
                                             void *out) {
  return ftjit_args_fast_entry_word(t->slots[hint - 1].word, t->room, regs, out);
}

/* [event] The return's record by a slot's word, as
 * ftjit_args_fast_entry_word makes the entry's. */
static inline uint32_t ftjit_args_fast_exit_word(uint64_t word, uint32_t room,
                                                 const ftjit_plugin_ret *ret,
                                                 void *out) {
  const uint32_t size = (uint32_t)(word >> 48);
  if (size == 0 || size > room)
    return (word & FTJIT_ARGS_FAST_NO_EXIT) != 0 ? 0 : FTJIT_ARGS_ASK_HOST;
  uint64_t *words = (uint64_t *)out;
  words[0] = size | UINT64_C(2) << 16;
  words[1] = ret->ret[0];
  return size;
}

/* [event] The return's record of the call of `ip` whose entry gave `hint`
 * (a hint of 0, or one that is not `ip`'s: FTJIT_ARGS_ASK_HOST). */
static inline uint32_t ftjit_args_fast_exit(const ftjit_args_fast_table *t,
                                            uint64_t hint, uint64_t ip,
                                            const ftjit_plugin_ret *ret,
                                            void *out) {
  if (hint == FTJIT_ARGS_HINT_NONE) return 0;
  if (hint == 0 || hint - 1 > t->mask || t->slots[hint - 1].ip != ip)
    return FTJIT_ARGS_ASK_HOST;
  return ftjit_args_fast_exit_word(t->slots[hint - 1].word, t->room, ret, out);
}

/* Which calls the session lets the plugin see (`ftjit run|attach --depth,
 * --sample, --min-duration, --start-at...`, record_info below): the host
 * decides before the plugin's callbacks run, and a call it leaves out
 * reaches neither entry nor exit. */
typedef struct ftjit_record_info {
  uint32_t struct_size;      /* sizeof(ftjit_record_info) */
  uint32_t max_depth;        /* 0: any; N: calls at most N traced frames
                                deep (per thread) */
  uint32_t sample_period;    /* 1: every call; N: per thread and function,
                                calls 1, N+1, 2N+1... */
  uint32_t triggers;         /* start/stop triggers (functions, times) */
  uint64_t min_duration_ns;  /* 0: every call; T: only calls that took at
                                least T (and the calls they made that did):
                                their entries are seen at their return,
                                timestamped as at their entry (now_ns) */
  uint32_t applies;          /* 0 when sample_period and min_duration_ns
                                leave this plugin's calls alone
                                (FTJIT_PLUGIN_F_EVERY_CALL) */
  uint32_t reserved;
} ftjit_record_info;

/* What the host offers. Every function may be called from any thread;
 * those marked [event] are safe on the event path (no lock, no
 * allocation after a thread's first event). */
typedef struct ftjit_host {
  uint32_t struct_size;
  uint32_t abi_version;

  void (*log)(ftjit_plugin_ctx *ctx, int level, const char *fmt, ...)
      FTJIT_PLUGIN_PRINTF(3, 4);
  /* Sets the message the host shows when init or report fails. */
  void (*set_error)(ftjit_plugin_ctx *ctx, const char *fmt, ...)
      FTJIT_PLUGIN_PRINTF(2, 3);

  /* [event] CLOCK_MONOTONIC in nanoseconds. */
  uint64_t (*now_ns)(void);
  /* [event] The calling thread's kernel id. */
  int32_t (*thread_id)(void);
  /* The calling thread's name. */
  const char *(*thread_name)(void);
  /* Demangled name of the traced function whose entry is `ip`, NULL if
   * `ip` is no traced function. Lives as long as the host. */
  const char *(*symbol)(ftjit_plugin_ctx *ctx, uint64_t ip);

  /* Options, typed as declared (the host checked them at load). Asking
   * for an undeclared option or with the wrong type returns 0/""/false. */
  int (*option_bool)(ftjit_plugin_ctx *ctx, const char *name);
  int64_t (*option_int)(ftjit_plugin_ctx *ctx, const char *name);
  double (*option_double)(ftjit_plugin_ctx *ctx, const char *name);
  const char *(*option_string)(ftjit_plugin_ctx *ctx, const char *name);

  /* Where streamed output and the report go, and in which format (one of
   * the descriptor's formats). The host opened the stream before init. */
  FILE *(*output)(ftjit_plugin_ctx *ctx);
  const char *(*format)(ftjit_plugin_ctx *ctx);

  /* [event] The calling thread's zeroed block of thread_storage_size
   * bytes; kept, after the thread exits too, until shutdown. NULL only if
   * memory ran out. */
  void *(*thread_storage)(ftjit_plugin_ctx *ctx);
  /* Visits every thread that has storage (not concurrently with events
   * when called from report). */
  void (*for_each_thread)(ftjit_plugin_ctx *ctx, ftjit_thread_visit_fn fn,
                          void *arg);

  /* [event] The calling thread's buffer: reserve room for one event of
   * event_size bytes, fill it, commit it. The host's writer thread hands
   * committed events to consume(), in order per thread. When the buffer is
   * full, the session's buffer policy (the user's choice, not the
   * plugin's) decides: "drop" returns NULL (the event is dropped and
   * counted); "overwrite" reuses the oldest event's room (a flight
   * recorder: consume() sees each thread's last events when the session
   * stops or is flushed); "block" waits until the writer has made room,
   * then returns it, or NULL (dropped and counted) after a bounded wait.
   * Under "block" consume() may run only when the session stops or is
   * flushed: events are spooled raw meanwhile. */
  void *(*event_reserve)(ftjit_plugin_ctx *ctx);
  void (*event_commit)(ftjit_plugin_ctx *ctx);

  /* [event] The calling thread's traced frames whose exits are hooked
   * (the shadow stack): how many, and their entry ips, outermost first. */
  uint32_t (*call_depth)(void);
  size_t (*call_stack)(uint64_t *ips, size_t max);

  /* Traced calls that ran untraced because they came from inside a
   * callback (the process-wide reentrancy guard), and events of this plugin
   * dropped because a buffer was full, so far. */
  void (*drop_counts)(ftjit_plugin_ctx *ctx, uint64_t *recursion,
                      uint64_t *events);

  /* The plugin's own per-instance pointer: set it in init, read it
   * anywhere ([event]). NULL until set. */
  void (*set_instance_data)(ftjit_plugin_ctx *ctx, void *data);
  void *(*instance_data)(ftjit_plugin_ctx *ctx);
  /* The traced process (what trace formats name their process track). */
  int32_t (*process_id)(void);
  const char *(*process_name)(void);

  /* Appended (struct_size tells whether the host has it): the counts of
   * the plugin's inline work, summed over threads, one visit per traced
   * function that counted any; read while the threads go on (from report:
   * the final counts). Visits nothing when no inline work ran. */
  void (*inline_counts)(ftjit_plugin_ctx *ctx, ftjit_inline_count_fn visit,
                        void *arg);
  /* Appended: the histograms of the plugin's inline latency, merged over
   * threads, one visit per traced function that timed or unwound a call;
   * read as inline_counts are. */
  void (*inline_histograms)(ftjit_plugin_ctx *ctx,
                            ftjit_plugin_histogram_fn visit, void *arg);

  /* Appended: arguments and return values (see FTJIT_PLUGIN_F_ARGS).
   * [event] The bytes the host added to each of the plugin's events, after its
   * event_size rounded up to 8, for one record; 0 when the session
   * captures nothing (or the plugin lacks FTJIT_PLUGIN_F_ARGS). */
  uint32_t (*args_room)(ftjit_plugin_ctx *ctx);
  /* [event] Writes the record of the call of `ip`, whose entry registers
   * are `regs`, to `out` (args_room bytes): its size; 0 when nothing of
   * `ip` is captured; FTJIT_ARGS_FILTERED when the session's conditions
   * (--when) leave the call out: record nothing of it, nor of its exit. */
  uint32_t (*args_capture)(ftjit_plugin_ctx *ctx, uint64_t ip,
                           const ftjit_plugin_regs *regs, void *out);
  /* [event] The record of its return value: size, or 0. */
  uint32_t (*retval_capture)(ftjit_plugin_ctx *ctx, uint64_t ip,
                             const ftjit_plugin_ret *ret, void *out);
  /* A record as text, "fd=3, path=\"/etc/passwd\"" (entry) or "4096"
   * (return), into out[cap] (NUL-terminated, cut to fit): the length of
   * the whole text, as snprintf returns it. */
  size_t (*args_format)(ftjit_plugin_ctx *ctx, uint64_t ip,
                        const void *record, char *out, size_t cap);
  /* The record's values, typed, in order: one visit each. */
  void (*args_visit)(ftjit_plugin_ctx *ctx, uint64_t ip, const void *record,
                     ftjit_arg_visit_fn visit, void *arg);
  /* The parameters of traced function `ip`: one visit each; returns how
   * many (0: none known). */
  uint32_t (*params)(ftjit_plugin_ctx *ctx, uint64_t ip,
                     ftjit_param_visit_fn visit, void *arg);

  /* Appended: grouping by one argument (`ftjit run|attach --by-arg NAME`,
   * what count and latency do with it). The CLI found NAME among the
   * traced functions' parameters (DWARF); the host knows, per function,
   * where it is at entry. Whatever the plugin's descriptor says, no inline
   * work is compiled in such a session: the callbacks see every call.
   *
   * NAME, or NULL when the session groups by no argument. */
  const char *(*arg_key_name)(ftjit_plugin_ctx *ctx);
  /* [event] The key of the call of `ip` whose entry registers are `regs`:
   * 1 and *key set when `ip` has the parameter, 0 and *key = 0 when it has
   * not (or the session groups by none). Equal values, equal keys:
   * integers, chars, enums and pointers are their bits zero-extended from
   * the parameter's size, bools 0 or 1; a `char *` is a 64-bit hash of its
   * first 64 bytes (0: NULL, 1: unreadable), the host keeping the bytes of
   * each distinct string (up to 4096 of them) for arg_key_value. Reads a
   * register or a stack slot; a string through the kernel. */
  int (*arg_key)(ftjit_plugin_ctx *ctx, uint64_t ip,
                 const ftjit_plugin_regs *regs, uint64_t *key);
  /* A key of `ip` as a typed value (name: the parameter's; text: as
   * args_format shows it, an enum by its enumerator's name, a pointer in
   * hex, a string quoted): one visit and 1, or 0 when `ip` has no such
   * parameter. */
  int (*arg_key_value)(ftjit_plugin_ctx *ctx, uint64_t ip, uint64_t key,
                       ftjit_arg_visit_fn visit, void *arg);

  /* Appended: args_capture and retval_capture with one lookup per call
   * instead of two. [event] args_capture, and in *exit_hint a value to
   * hand to retval_capture_hint at the same call's return (never 0;
   * FTJIT_ARGS_HINT_NONE when nothing of `ip` is captured). A plugin keeps
   * it with the frame, as it keeps the frame's entry time. */
  uint32_t (*args_capture_hint)(ftjit_plugin_ctx *ctx, uint64_t ip,
                                const ftjit_plugin_regs *regs, void *out,
                                uint64_t *exit_hint);
  /* [event] retval_capture, given the entry's hint (0: none kept, which
   * costs the lookup retval_capture makes). A hint that is not the
   * entry's of `ip` is found out and costs the lookup too: never a wrong
   * record. */
  uint32_t (*retval_capture_hint)(ftjit_plugin_ctx *ctx, uint64_t ip,
                                  uint64_t exit_hint,
                                  const ftjit_plugin_ret *ret, void *out);

  /* Appended: which calls the session records (ftjit_record_info); never
   * NULL. A report may say so: count prints the sampling its counts are
   * exempt from. */
  const ftjit_record_info *(*record_info)(ftjit_plugin_ctx *ctx);

  /* Appended: [event] the session's table of common captures
   * (ftjit_args_fast_table above), the same for every thread and for the
   * session's life; NULL when the plugin gets no records (args_room 0). */
  const ftjit_args_fast_table *(*args_fast_table)(ftjit_plugin_ctx *ctx);
} ftjit_host;

/* Guarantees a plugin may rely on:
 *  - consume() is called by one writer thread at a time, never concurrently
 *    with itself, in commit order per thread;
 *  - report()'s `out` is output(ctx);
 *  - report() never runs concurrently with consume() or the event path
 *    (tracing stopped and every buffer was drained before);
 *  - event_reserve() returns memory aligned to 8 bytes, and consume()'s
 *    event pointer is aligned alike;
 *  - option_string()'s result lives until shutdown, process_name()'s as
 *    long as the host;
 *  - the [event] services never touch FP/vector registers, so callbacks of
 *    a FTJIT_PLUGIN_F_NO_FP plugin may call them. */

typedef struct ftjit_plugin {
  uint32_t struct_size;       /* sizeof(ftjit_plugin) */
  uint32_t abi_version;       /* FTJIT_PLUGIN_ABI_VERSION */
  const char *name;           /* [a-z0-9_-]+, e.g. "count" */
  const char *description;    /* one line */
  const ftjit_plugin_option *options;
  uint32_t n_options;
  uint32_t flags;             /* FTJIT_PLUGIN_F_* */
  /* Output formats the plugin writes, NULL-terminated; the first is the
   * default (e.g. {"text", "json", "tsv", NULL}). */
  const char *const *formats;
  uint32_t thread_storage_size;  /* bytes per thread; 0: none */
  uint32_t event_size;           /* bytes per buffered event; 0: none */
  uint32_t buffer_events;        /* events per thread buffer; 0: default */
  uint32_t reserved;

  int (*init)(ftjit_plugin_ctx *ctx);        /* 0 = ready; else set_error */
  void (*shutdown)(ftjit_plugin_ctx *ctx);   /* optional */
  ftjit_plugin_entry_fn entry;               /* optional if exit is set */
  ftjit_plugin_exit_fn exit;                 /* optional: hooks returns */
  /* Writer thread: one committed event of `thread`. Optional. */
  void (*consume)(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                  const void *event);
  /* After tracing stopped: writes the result to `out` in `format`.
   * 0 = done; else set_error. Optional. */
  int (*report)(ftjit_plugin_ctx *ctx, FILE *out, const char *format);

  /* Appended (struct_size tells whether the plugin has it): inline work
   * (ftjit_plugin_inline above); NULL: none. */
  const ftjit_plugin_inline *inline_work;

  /* Appended: consume() for a run of `n` (>= 1) consecutive committed
   * events of `thread`, `stride` bytes apart (the host's event slot size),
   * in commit order. Optional; when set, the host hands events through it
   * instead of consume() (each event once, through one of the two), so a
   * plugin that writes a file can encode a run into one buffer and write
   * it at once. Everything consume() promises holds; a plugin that sets it
   * should still set consume (hosts before it call only that). */
  void (*consume_run)(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                      const void *events, size_t n, size_t stride);
} ftjit_plugin;

typedef const ftjit_plugin *(*ftjit_plugin_entry_point)(const ftjit_host *host);

#ifdef __cplusplus
}
#endif
#endif /* FTJIT_PLUGIN_H */
