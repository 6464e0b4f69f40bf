/* SPDX-License-Identifier: MIT */
/* ftjit embedding API (C): attach tracer callbacks to the patchable function
 * entries of the calling process.
 *
 * Threading: every ftjit_* function here may be called from any thread; the
 * engine serialises control operations internally. Callbacks run on the
 * traced thread, inside the traced function's entry (or, for exit
 * callbacks, right after it returned). A callback must not assume it runs
 * alone and must not throw.
 *
 * Reentrancy: while a thread runs any ftjit callback, traced functions it
 * calls (a tracer that allocates while tracing malloc, a signal handler that
 * runs traced code) do not call callbacks again: they run untraced, and the
 * engine counts them in ftjit_stats.recursion_drops.
 *
 * Lifetime: after ftjit_detach() returns, no thread is inside a trampoline
 * or callback of that ops any more (ftjit waits for a grace period), so the
 * ops and its private data may be freed. */
#ifndef FTJIT_FTJIT_H
#define FTJIT_FTJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTJIT_API_VERSION 7

/* Status codes. FTJIT_OK is zero; every failing call also leaves a message
 * for ftjit_last_error() on the calling thread. */
typedef enum ftjit_status {
  FTJIT_OK = 0,
  FTJIT_E_INVALID_ARGUMENT = 1,
  FTJIT_E_NO_MATCH = 2,          /* the filter selects no patchable site */
  FTJIT_E_NOT_PATCHABLE = 3,     /* a named function has no patchable entry */
  FTJIT_E_ALREADY_ATTACHED = 4,  /* this ops is attached already */
  FTJIT_E_NOT_ATTACHED = 5,      /* detach/set_filter of an ops not attached */
  FTJIT_E_UNEXPECTED_BYTES = 6,  /* a sled is not what the layout promises */
  FTJIT_E_OUT_OF_RANGE = 7,      /* no trampoline memory within branch reach */
  FTJIT_E_UNSUPPORTED = 8,       /* strategy/layout combination not possible */
  FTJIT_E_NO_SITES = 9,          /* no loaded module has patchable entries */
  FTJIT_E_SYSTEM = 10,           /* an OS call failed (errno in the message) */
  FTJIT_E_ELF = 11,              /* a module's ELF file could not be parsed */
  FTJIT_E_INTERNAL = 12
} ftjit_status;

/* How a site reaches the ops' callback (see DESIGN.md, "Dispatch"). */
typedef enum ftjit_strategy {
  FTJIT_STRATEGY_AUTO = 0,      /* chosen per site by the engine */
  FTJIT_STRATEGY_LIST = 1,      /* shared trampoline walks every list ops */
  FTJIT_STRATEGY_CALL_OPS = 2,  /* shared trampoline loads the site's slot */
  FTJIT_STRATEGY_GENERATED = 3, /* per-ops JIT trampoline, ops baked in */
  FTJIT_STRATEGY_DIRECT = 4     /* the site calls ops->direct_trampoline */
} ftjit_strategy;

/* Registers at the traced function's entry, saved by the trampoline. A
 * callback may change arg[]; the new values are what the function sees.
 *   x86-64: arg[0..5] = rdi rsi rdx rcx r8 r9, arg[6] = rax (vararg count),
 *           arg[7] = r10 (static chain).
 * fp[] holds xmm0-7 only when the ops did not set FTJIT_OPS_F_NO_FP.
 * Every other register the callback may change is given back too (the
 * caller may keep values in call-clobbered registers the traced function
 * does not write: GCC's -fipa-ra), except the upper halves of ymm/zmm
 * registers: a callback that runs AVX code on a thread whose caller keeps
 * 256- or 512-bit values across a traced call must save them itself. */
typedef struct ftjit_regs {
  uint64_t arg[8];
  uint64_t direct;   /* engine-internal: direct trampoline to continue to */
  uint64_t sp;       /* stack pointer at the traced function's entry */
  uint8_t fp[8][16];
} ftjit_regs;

struct ftjit_ops;

/* ip: the traced function's entry address. parent_ip: its return address. */
typedef void (*ftjit_func_t)(uint64_t ip, uint64_t parent_ip,
                             struct ftjit_ops *ops, ftjit_regs *regs);

/* Return-value registers when a traced function returns.
 *   x86-64: ret[0] = rax, ret[1] = rdx, fp[0..1] = xmm0, xmm1. */
typedef struct ftjit_ret_regs {
  uint64_t ret[2];
  uint8_t fp[2][16];
} ftjit_ret_regs;

/* Called when a traced function returns, with the same ip and parent_ip as
 * its entry. `ret` is NULL when the frame did not return but was unwound
 * (a C++ exception, longjmp): every entry gets exactly one exit. */
typedef void (*ftjit_exit_func_t)(uint64_t ip, uint64_t parent_ip,
                                  struct ftjit_ops *ops, ftjit_ret_regs *ret);

/* Restricts an ops to some threads; a thread matching any part passes. */
typedef struct ftjit_thread_filter {
  const int32_t *tids;     /* kernel thread ids (gettid) */
  size_t n_tids;
  const char *name_glob;   /* glob over the thread name (comm); NULL: none */
  int main_thread;         /* nonzero: the process's main thread */
} ftjit_thread_filter;

/* Ops flags. */
#define FTJIT_OPS_F_NO_FP 0x1u /* func and exit_func never touch vector/FP
                                  state: the trampolines skip saving
                                  xmm0-15 (ret->fp still holds xmm0-1) */
#define FTJIT_OPS_F_RELOCATE 0x2u /* also trace the functions the filter
                                  selects that have no patchable entry,
                                  by relocating their first instructions
                                  into a stub (x86-64, arm64; functions
                                  with a sled are always traced there).
                                  A function that cannot be relocated
                                  safely is skipped, with its reason in
                                  the log; detach restores its bytes. */

/* Work the engine compiles into the code a site calls, instead of calling
 * `func` (seed 001's BPF trampoline, for tracers): no registers saved, no
 * call. Since API version 4.
 *
 *   FTJIT_INLINE_COUNT    at entry: the calling thread's counter of this
 *                         site += 1 (per-thread counters: no lock, no lost
 *                         count with any number of threads). Read them,
 *                         summed over threads, with ftjit_inline_read().
 *                         Without exit_func.
 *   FTJIT_INLINE_LATENCY  (since API 5) at entry: the ISA's cycle counter
 *                         kept on the shadow stack, the return hooked; at
 *                         the return: the duration in ns added to the
 *                         calling thread's histogram of this site (calls,
 *                         total, max, log2 buckets; frames left by an
 *                         exception or longjmp counted as unwound). Read
 *                         them, merged over threads, with
 *                         ftjit_inline_read_histograms(). Needs exit_func:
 *                         the callbacks time what the engine does not.
 *                         With inline_sample = N > 1 (since API 7), the
 *                         calls between a thread's turns at a site cost a
 *                         decrement: no cycle counter read, no hooked
 *                         return. From such a site the callbacks get
 *                         only turns the code left to them (a thread's
 *                         first call, a turn met inside a callback or
 *                         with the shadow stack full), and
 *                         ftjit_inline_turn() says so; from a site the
 *                         engine does not compile they get every call,
 *                         to sample themselves.
 *
 * The engine compiles it where one ops alone is attached to a site with the
 * generated (or auto) strategy, without thread filter, on an ISA whose
 * backend compiles the action (latency also needs a cycle counter whose
 * deltas are durations on this machine). Everywhere else, and for a
 * thread's first call, `func` (and `exit_func`) run as usual: a tracer
 * that offers inline work must do the same work in its callbacks, and
 * merge both. Inline work runs on every call, also calls made from inside
 * callbacks (it calls nothing, so it cannot recurse):
 * ftjit_stats.recursion_drops does not count them. */
typedef enum ftjit_inline_action {
  FTJIT_INLINE_NONE = 0,
  FTJIT_INLINE_COUNT = 1,
  FTJIT_INLINE_LATENCY = 2
} ftjit_inline_action;

/* One tracer registration. Initialise with ftjit_ops_init(); the caller owns
 * the memory and must keep it alive until ftjit_detach() returns. `func` is
 * read at attach time (generated trampolines bake it in).
 * Keep what the callback writes at every call (counters, buffers) off the
 * cache line(s) of the ftjit_ops: call-ops trampolines read the ops at every
 * call, and a counter sharing its line made a call cost 33 ns instead of 5
 * in ftjit-bench. */
typedef struct ftjit_ops {
  uint32_t struct_size;             /* sizeof(ftjit_ops), set by init */
  uint32_t flags;                   /* FTJIT_OPS_F_* */
  ftjit_func_t func;                /* must stay at offset 8: trampolines
                                       load it from there */
  void *private_data;               /* for the callback, untouched by ftjit */
  ftjit_strategy strategy;          /* AUTO by default */
  const void *direct_trampoline;    /* FTJIT_STRATEGY_DIRECT only: code the
                                       site calls; it must preserve argument
                                       registers and return with `ret` */
  void *internal;                   /* engine-owned; do not touch */
  /* Since API version 2 (struct_size tells): */
  ftjit_exit_func_t exit_func;      /* optional: called when each traced
                                       call returns (return-address
                                       replacement with a shadow stack) */
  const ftjit_thread_filter *threads; /* optional: only these threads call
                                       the callbacks; read at attach. A
                                       thread's name is matched the first
                                       time it reaches the ops. */
  /* Since API version 4: */
  uint32_t inline_entry;            /* ftjit_inline_action, read at attach */
  /* Since API version 7 (was reserved, 0 from ftjit_ops_init): */
  uint32_t inline_sample;           /* FTJIT_INLINE_LATENCY: time 1 call in
                                       N of each site, per thread (calls 1,
                                       N+1, 2N+1...); 0 or 1: every call */
} ftjit_ops;

/* A filter over sites. Each pattern is a glob (`*`, `?`, `[...]`) over the
 * mangled or the demangled name, optionally prefixed with `MODULE!` where
 * MODULE is a glob over the module's file name (basename). An empty include
 * list means "every site". */
typedef struct ftjit_filter {
  const char *const *include;
  size_t n_include;
  const char *const *exclude;
  size_t n_exclude;
} ftjit_filter;

typedef struct ftjit_engine ftjit_engine;

/* Which registers trampolines keep around callbacks (TOOLCHAIN.md Q6).
 * Since API version 4.
 *   FTJIT_SAVES_AUTO  per module, from its evidence: the psABI's set when
 *                     every compile unit's DW_AT_producer shows GCC with
 *                     -fpatchable-function-entry (which turns -fipa-ra
 *                     off), else every call-clobbered register;
 *   FTJIT_SAVES_ABI   the psABI's set everywhere: entry rdi rsi rdx rcx r8
 *                     r9 rax r10 and xmm0-7 (x86-64); a module whose
 *                     evidence says otherwise gets a warning;
 *   FTJIT_SAVES_ALL   every call-clobbered register everywhere (what an
 *                     `optimize` attribute in a flag build needs: no
 *                     binary shows it).
 * Callbacks of FTJIT_OPS_F_NO_FP ops need no FP/vector register kept
 * either way. */
typedef enum ftjit_saves {
  FTJIT_SAVES_AUTO = 0,
  FTJIT_SAVES_ABI = 1,
  FTJIT_SAVES_ALL = 2
} ftjit_saves;

typedef struct ftjit_engine_options {
  uint32_t struct_size;           /* sizeof(ftjit_engine_options) */
  ftjit_strategy default_strategy; /* for ops whose strategy is AUTO */
  /* Since API version 3 (struct_size tells; older callers get 0): */
  int32_t watch_dlopen;           /* nonzero: dlopen, dlmopen and dlclose are
                                     redirected (in every module's GOT) so
                                     that a library loaded later gets the
                                     sites of every attached ops whose
                                     filter selects them before dlopen
                                     returns, and an unloaded one is
                                     forgotten. Off: the same happens at
                                     ftjit_refresh_modules() or the next
                                     attach/set_filter/detach. */
  /* Since API version 4: */
  int32_t saves;                  /* ftjit_saves (AUTO by default) */
} ftjit_engine_options;

/* Engine statistics (monotonic counters since create). */
typedef struct ftjit_stats {
  uint64_t sites;             /* patchable sites discovered */
  uint64_t sites_enabled;     /* sites currently calling a trampoline */
  uint64_t batches;           /* patch batches applied */
  uint64_t syncs;             /* core-serialising syncs issued */
  uint64_t last_batch_syncs;  /* syncs of the most recent batch */
  uint64_t last_batch_sites;  /* sites written by the most recent batch */
  uint64_t trampolines;       /* live trampolines */
  uint64_t trampoline_bytes;  /* code bytes of live trampolines */
  uint64_t traps_emulated;    /* int3 hits emulated during batches */
  uint64_t grace_periods;
  uint64_t sync_fallbacks;    /* syncs done without membarrier */
  uint64_t recursion_drops;   /* traced calls made from inside a callback,
                                 which ran untraced */
  uint64_t exit_hooks;        /* return addresses replaced */
  uint64_t exit_hook_drops;   /* calls whose exit was not hooked (a
                                 thread's shadow stack was full) */
  uint64_t frames_unwound;    /* hooked frames left by exception/longjmp */
  /* Since API version 3, appended (the struct has no size field:
     ftjit_get_stats writes all of it, so callers must be rebuilt): */
  uint64_t dlopen_refreshes;  /* refreshes run by the dlopen watch */
  uint64_t dlopen_patch_ns;   /* time they took (discovery and patching),
                                 paid by the thread calling dlopen/dlclose */
  uint64_t modules_unloaded;  /* modules found gone and forgotten */
  uint64_t new_module_skips;  /* sites or modules a filter selected after
                                 a load but could not patch (logged) */
} ftjit_stats;

void ftjit_engine_options_init(ftjit_engine_options *opts);
void ftjit_ops_init(ftjit_ops *ops);

/* Creates an engine for this process, discovering the sites of every
 * loaded module. Returns NULL on failure (see ftjit_last_error()). Only one
 * engine may exist per process at a time. */
ftjit_engine *ftjit_engine_create(const ftjit_engine_options *opts);
/* Detaches every ops, restores every site, frees the engine. */
void ftjit_engine_destroy(ftjit_engine *engine);

/* Changes the engine's ftjit_saves for trampolines made from now on (ops
 * attached later, sites they gain); what is attached keeps its own. */
ftjit_status ftjit_engine_set_saves(ftjit_engine *engine, ftjit_saves saves);

/* Re-reads the list of loaded modules (after dlopen). Returns the number of
 * new sites found, or -1 on error. */
long ftjit_refresh_modules(ftjit_engine *engine);

ftjit_status ftjit_attach(ftjit_engine *engine, ftjit_ops *ops,
                          const ftjit_filter *filter);
ftjit_status ftjit_set_filter(ftjit_engine *engine, ftjit_ops *ops,
                              const ftjit_filter *filter);
ftjit_status ftjit_detach(ftjit_engine *engine, ftjit_ops *ops);
/* Since API 6: pauses (nonzero) or resumes an attached ops. Paused, none of
 * its sites is patched for it (one batch, as detach would), yet it stays
 * attached: frames it hooked still return through its exit_func, its
 * inline counts are kept, ftjit_set_filter changes what the resume will
 * patch, and modules loaded meanwhile wait for the resume. Resuming
 * patches what its filter selects then. */
ftjit_status ftjit_set_paused(ftjit_engine *engine, ftjit_ops *ops, int paused);

/* Number of sites the ops is attached to, or -1 if it is not attached. */
long ftjit_ops_site_count(ftjit_engine *engine, const ftjit_ops *ops);

void ftjit_get_stats(ftjit_engine *engine, ftjit_stats *out);

/* Depth of the calling thread's shadow stack (hooked frames live now), and
 * their entry addresses, outermost first; returns how many were written. */
uint32_t ftjit_shadow_depth(void);
size_t ftjit_shadow_stack(uint64_t *ips, size_t max);

/* Inside a callback of an ops with inline_sample > 1: 1 if the call came
 * from a site's inline code, which took its turn already (the thread's
 * first call of the site, or a turn the code left to the callbacks); 0 if
 * it came from a site the engine does not compile, whose calls the
 * callbacks sample themselves. Since API version 7. */
int ftjit_inline_turn(void);

/* The inline counters of `ops` (FTJIT_INLINE_COUNT), summed over every
 * thread, read while the threads go on (each thread's counter is read
 * whole; a call in progress is counted or not): `visit(ip, count, arg)` once
 * per site with a nonzero count, ip = the site's entry. Works while the ops
 * is attached and, with the final counts, after ftjit_detach() until it is
 * attached again or the engine is destroyed. Returns the number of sites
 * visited, or -1 (ftjit_last_error()) if the engine never attached it. */
typedef void (*ftjit_inline_visit_fn)(uint64_t ip, uint64_t count, void *arg);
long ftjit_inline_read(ftjit_engine *engine, const ftjit_ops *ops,
                       ftjit_inline_visit_fn visit, void *arg);

/* One site's inline latency (FTJIT_INLINE_LATENCY), merged over threads. */
#define FTJIT_INLINE_BUCKETS 65
typedef struct ftjit_inline_histogram {
  uint64_t ip;        /* the site's entry */
  uint64_t calls;     /* returns timed: the sum of the buckets */
  uint64_t total_ns;
  uint64_t max_ns;
  uint64_t unwound;   /* frames left by an exception or longjmp: not timed */
  uint64_t buckets[FTJIT_INLINE_BUCKETS];  /* [0]: 0 ns; [k]: [2^(k-1), 2^k) */
} ftjit_inline_histogram;

/* The inline latency histograms of `ops`, as ftjit_inline_read reads
 * counts (while the threads go on; after detach, the final ones): one
 * visit per site that timed or unwound a call. Since API version 5. */
typedef void (*ftjit_inline_histogram_fn)(const ftjit_inline_histogram *h, void *arg);
long ftjit_inline_read_histograms(ftjit_engine *engine, const ftjit_ops *ops,
                                  ftjit_inline_histogram_fn visit, void *arg);

/* The demangled name of the site whose entry is `ip`, or NULL if `ip` is not
 * a site. The string lives as long as the engine. */
const char *ftjit_site_name(ftjit_engine *engine, uint64_t ip);

/* The message of the last failing call on this thread ("" if none). */
const char *ftjit_last_error(void);
const char *ftjit_status_name(ftjit_status status);
const char *ftjit_strategy_name(ftjit_strategy strategy);

#ifdef __cplusplus
}
#endif
#endif /* FTJIT_FTJIT_H */
