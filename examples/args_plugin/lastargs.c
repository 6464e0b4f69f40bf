/* SPDX-License-Identifier: MIT */
/* An out-of-tree tracer plugin that uses the host's arguments services
 * (`ftjit run|attach --args`): per traced function, its parameters as the
 * DWARF declares them, how many calls it had, the arguments of the
 * last call and the last value returned, e.g.
 *
 *     work_fib(int n): 1973 calls, last (n=1) = 2817
 *
 * The event path copies raw bytes only (args_capture, retval_capture into
 * the plugin's own events); the writer thread formats them (args_format);
 * the report names the parameters (params). Built against the SDK header
 * alone, like examples/hello_plugin. */
#include <ftjit/plugin.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One event; the host's record of the arguments (or the return value)
 * follows it when the session captures them (args_room bytes). */
struct event {
  uint64_t ip;
  uint32_t has_record;
  uint32_t is_return;
};

#define MAX_FUNCTIONS 512
struct function {
  uint64_t ip;
  uint64_t calls;
  char last_args[192];
  char last_return[64];
};
struct state {
  struct function functions[MAX_FUNCTIONS];
  size_t n;
};

static const ftjit_host *g_host;

static int lastargs_init(ftjit_plugin_ctx *ctx) {
  /* The arguments services came last in ftjit_host: an older host has
   * none, and this plugin has nothing to show there. */
  if (g_host->struct_size < offsetof(ftjit_host, params) + sizeof(g_host->params)) {
    g_host->set_error(ctx, "lastargs: this ftjit has no arguments services");
    return 1;
  }
  struct state *s = calloc(1, sizeof *s);
  if (s == NULL) return 1;
  g_host->set_instance_data(ctx, s);
  return 0;
}

static void lastargs_shutdown(ftjit_plugin_ctx *ctx) { free(g_host->instance_data(ctx)); }

static void record(ftjit_plugin_ctx *ctx, uint64_t ip, uint32_t is_return, const ftjit_plugin_regs *regs,
                   const ftjit_plugin_ret *ret) {
  struct event *e = g_host->event_reserve(ctx);
  if (e == NULL) return;
  e->ip = ip;
  e->is_return = is_return;
  e->has_record = 0;
  if (g_host->args_room(ctx) != 0) {
    const uint32_t n = is_return ? g_host->retval_capture(ctx, ip, ret, e + 1)
                                 : g_host->args_capture(ctx, ip, regs, e + 1);
    if (n == FTJIT_ARGS_FILTERED) return; /* --when said no: not committed */
    e->has_record = n != 0;
  }
  g_host->event_commit(ctx);
}

static void lastargs_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx, ftjit_plugin_regs *regs) {
  (void)parent_ip;
  record(ctx, ip, 0, regs, NULL);
}

static void lastargs_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx, const ftjit_plugin_ret *ret) {
  (void)parent_ip;
  if (ret != NULL) record(ctx, ip, 1, NULL, ret);
}

/* The writer thread, one event at a time. */
static void lastargs_consume(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread, const void *event) {
  (void)thread;
  struct state *s = g_host->instance_data(ctx);
  const struct event *e = event;
  struct function *f = NULL;
  for (size_t i = 0; i < s->n; ++i) {
    if (s->functions[i].ip == e->ip) f = &s->functions[i];
  }
  if (f == NULL) {
    if (s->n == MAX_FUNCTIONS) return;
    f = &s->functions[s->n++];
    f->ip = e->ip;
  }
  if (!e->is_return) ++f->calls;
  if (!e->has_record) return;
  if (e->is_return) {
    g_host->args_format(ctx, e->ip, e + 1, f->last_return, sizeof f->last_return);
  } else {
    g_host->args_format(ctx, e->ip, e + 1, f->last_args, sizeof f->last_args);
  }
}

struct signature {
  char text[256];
  size_t n;
};

static void add_param(const ftjit_param_info *p, void *arg) {
  struct signature *sig = arg;
  const size_t left = sizeof sig->text - strlen(sig->text);
  snprintf(sig->text + strlen(sig->text), left, "%s%s %s", sig->n++ ? ", " : "", p->type, p->name);
}

static int lastargs_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  (void)format;
  struct state *s = g_host->instance_data(ctx);
  for (size_t i = 0; i < s->n; ++i) {
    const struct function *f = &s->functions[i];
    struct signature sig = {"", 0};
    g_host->params(ctx, f->ip, add_param, &sig);
    const char *name = g_host->symbol(ctx, f->ip);
    fprintf(out, "%s(%s): %llu calls, last (%s)%s%s\n", name != NULL ? name : "?", sig.text,
            (unsigned long long)f->calls, f->last_args, f->last_return[0] ? " = " : "", f->last_return);
  }
  return 0;
}

static const char *const kFormats[] = {"text", NULL};

static const ftjit_plugin kDescriptor = {
    .struct_size = sizeof(ftjit_plugin),
    .abi_version = FTJIT_PLUGIN_ABI_VERSION,
    .name = "lastargs",
    .description = "per function: its parameters, its calls, the last arguments and return value",
    .flags = FTJIT_PLUGIN_F_ARGS,
    .formats = kFormats,
    .event_size = sizeof(struct event),
    .init = lastargs_init,
    .shutdown = lastargs_shutdown,
    .entry = lastargs_entry,
    .exit = lastargs_exit,
    .consume = lastargs_consume,
    .report = lastargs_report,
};

FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(const ftjit_host *host) {
  if (host == NULL || host->abi_version != FTJIT_PLUGIN_ABI_VERSION) return NULL;
  g_host = host;
  return &kDescriptor;
}
