/* SPDX-License-Identifier: MIT */
/* Plugins the host must refuse, one defect each; the build compiles this file
 * once per BAD_* macro. Apart from its defect each is a valid plugin, so a
 * refusal can only come from that defect. */
#include <stddef.h>

#include "ftjit/plugin.h"

static const ftjit_host *host;

static int on_init(ftjit_plugin_ctx *ctx) {
#ifdef BAD_INIT_FAILS
  host->set_error(ctx, "cannot size the table: %d buckets", -3);
  return 1;
#else
  (void)ctx;
  return 0;
#endif
}

__attribute__((unused)) static void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                     ftjit_plugin_regs *regs) {
  (void)ip;
  (void)parent_ip;
  (void)ctx;
  (void)regs;
}

__attribute__((unused)) static void on_consume(ftjit_plugin_ctx *ctx, const ftjit_thread_info *t, const void *e) {
  (void)ctx;
  (void)t;
  (void)e;
}

static const ftjit_plugin_option options[] = {
    {"size", FTJIT_OPTION_INT,
#ifdef BAD_BAD_DEFAULT
     "ten",
#else
     "10",
#endif
     "table size"},
#ifdef BAD_DUP_OPTION
    {"size", FTJIT_OPTION_INT, "1", "again"},
#endif
};

static const char *const formats[] = {"text", "tsv", NULL};

#if defined(BAD_INLINE_VERSION) || defined(BAD_INLINE_ACTION) || defined(BAD_INLINE_EXIT) || \
    defined(BAD_INLINE_NO_ENTRY) || defined(BAD_INLINE_WITH_EXIT) ||                    \
    defined(BAD_INLINE_LATENCY_ONE_END) || defined(BAD_INLINE_LATENCY_NO_EXIT)
#define BAD_INLINE 1
__attribute__((unused)) static void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                                            const ftjit_plugin_ret *ret) {
  (void)ip;
  (void)parent_ip;
  (void)ctx;
  (void)ret;
}
static const ftjit_plugin_inline inline_work = {
    sizeof(ftjit_plugin_inline),
#ifdef BAD_INLINE_VERSION
    FTJIT_PLUGIN_INLINE_VERSION + 1,
#else
    FTJIT_PLUGIN_INLINE_VERSION,
#endif
#ifdef BAD_INLINE_ACTION
    9,
#elif defined(BAD_INLINE_LATENCY_ONE_END) || defined(BAD_INLINE_LATENCY_NO_EXIT)
    FTJIT_PLUGIN_INLINE_LATENCY,
#else
    FTJIT_PLUGIN_INLINE_COUNT,
#endif
#ifdef BAD_INLINE_EXIT
    FTJIT_PLUGIN_INLINE_COUNT,
#elif defined(BAD_INLINE_LATENCY_NO_EXIT)
    FTJIT_PLUGIN_INLINE_LATENCY,
#else
    FTJIT_PLUGIN_INLINE_NONE,
#endif
};
#endif

static const ftjit_plugin descriptor = {
#ifdef BAD_SMALL
    .struct_size = offsetof(ftjit_plugin, init),
#else
    .struct_size = sizeof(ftjit_plugin),
#endif
#ifdef BAD_ABI
    .abi_version = FTJIT_PLUGIN_ABI_VERSION + 98,
#else
    .abi_version = FTJIT_PLUGIN_ABI_VERSION,
#endif
#ifdef BAD_BAD_NAME
    .name = "Bad Name",
#else
    .name = "bad",
#endif
    .description = "a plugin with one defect",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .formats = formats,
    .event_size = 8,
    .init = on_init,
#if !defined(BAD_NO_CALLBACKS) && !defined(BAD_INLINE_NO_ENTRY)
    .entry = on_entry,
#endif
#if defined(BAD_INLINE_NO_ENTRY) || defined(BAD_INLINE_WITH_EXIT) || defined(BAD_INLINE_LATENCY_ONE_END)
    .exit = on_exit,
#endif
#ifndef BAD_EVENTS_NO_CONSUME
    .consume = on_consume,
#endif
#ifdef BAD_INLINE
    .inline_work = &inline_work,
#endif
};

#ifdef BAD_NO_SYMBOL
/* A near miss: the right shape under the wrong name. */
FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v0(const ftjit_host *h) {
  host = h;
  return &descriptor;
}
#else
FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(const ftjit_host *h) {
  host = h;
#ifdef BAD_NULL
  (void)descriptor;
  return NULL;
#else
  return &descriptor;
#endif
}
#endif
