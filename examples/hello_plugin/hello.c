/* SPDX-License-Identifier: MIT */
/* hello: a third-party tracer plugin, built with <ftjit/plugin.h> only.
 * Counts the calls and the returns of the functions it traces, per thread
 * (no lock, no allocation on the event path), and greets at report time. */
#include <ftjit/plugin.h>
#include <inttypes.h>
#include <string.h>

static const ftjit_host *host;

/* Per thread, in the host's per-thread storage. */
struct counts {
  uint64_t calls;
  uint64_t returns;
};

static void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                     ftjit_plugin_regs *regs) {
  (void)ip, (void)parent_ip, (void)regs;
  struct counts *c = host->thread_storage(ctx);
  if (c != NULL) c->calls++;
}

static void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
                    const ftjit_plugin_ret *ret) {
  (void)ip, (void)parent_ip, (void)ret;
  struct counts *c = host->thread_storage(ctx);
  if (c != NULL) c->returns++;
}

static void add_thread(const ftjit_thread_info *thread, void *storage, void *sum) {
  (void)thread;
  const struct counts *c = storage;
  struct counts *total = sum;
  total->calls += c->calls;
  total->returns += c->returns;
}

static int init(ftjit_plugin_ctx *ctx) {
  if (strlen(host->option_string(ctx, "greeting")) == 0) {
    host->set_error(ctx, "greeting must not be empty");
    return 1;
  }
  return 0;
}

static int report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  (void)format;
  struct counts total = {0, 0};
  host->for_each_thread(ctx, add_thread, &total);
  fprintf(out, "%s: %" PRIu64 " calls, %" PRIu64 " returns\n",
          host->option_string(ctx, "greeting"), total.calls, total.returns);
  return 0;
}

static const ftjit_plugin_option options[] = {
    {"greeting", FTJIT_OPTION_STRING, "hello", "what the report starts with"},
};
static const char *const formats[] = {"text", NULL};

FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(const ftjit_host *h) {
  static ftjit_plugin plugin;
  host = h;
  plugin.struct_size = sizeof plugin;
  plugin.abi_version = FTJIT_PLUGIN_ABI_VERSION;
  plugin.name = "hello";
  plugin.description = "counts calls and returns, then says hello";
  plugin.options = options;
  plugin.n_options = 1;
  plugin.formats = formats;
  plugin.thread_storage_size = sizeof(struct counts);
  plugin.init = init;
  plugin.entry = on_entry;
  plugin.exit = on_exit;
  plugin.report = report;
  return &plugin;
}
