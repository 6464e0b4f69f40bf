// SPDX-License-Identifier: MIT
// trace plugin: every entry and exit of traced functions, timestamped,
// streamed by the host's writer thread to text, Chrome JSON or Perfetto.
#include "trace_writers.h"

#include <new>
#include <string_view>

namespace ftjit_trace {

const std::string &NameCache::name(uint64_t ip) {
  auto [it, fresh] = names_.try_emplace(ip);
  if (fresh) it->second = ftjit_plugin_support::symbol_or_hex(g_host, ctx_, ip);
  return it->second;
}

std::string ArgReader::text(uint64_t ip, const void *record) const {
  if (record == nullptr) return {};
  char buf[512];
  const size_t n = g_host->args_format(ctx_, ip, record, buf, sizeof buf);
  if (n < sizeof buf) return std::string(buf, n);
  std::string out(n + 1, '\0');
  g_host->args_format(ctx_, ip, record, out.data(), out.size());
  out.resize(n);
  return out;
}

std::vector<ArgValue> ArgReader::values(uint64_t ip, const void *record) const {
  std::vector<ArgValue> out;
  if (record == nullptr) return out;
  g_host->args_visit(
      ctx_, ip, record,
      [](const ftjit_arg_value *v, void *arg) {
        static_cast<std::vector<ArgValue> *>(arg)->push_back(
            {v->name != nullptr ? v->name : "", v->type, v->i, v->u, v->d,
             v->text != nullptr ? v->text : ""});
      },
      &out);
  return out;
}

namespace {

namespace support = ftjit_plugin_support;

const char *const kFormats[] = {"text", "chrome", "perfetto", nullptr};
// 2 MiB per thread at 32 bytes an event: the writer has milliseconds of
// burst to catch up before a thread drops.
constexpr uint32_t kBufferEvents = 65536;

// No lock: consume never runs concurrently with itself, and report only
// after detach drained every buffer; the event path never touches it.
struct Instance {
  explicit Instance(ftjit_plugin_ctx *c) : names(c), args(c) {}
  NameCache names;
  ArgReader args;
  ProcessInfo process;
  std::unique_ptr<Writer> writer;
  FILE *out = nullptr;
  bool finished = false;
};

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

int trace_init(ftjit_plugin_ctx *ctx) {
  // Older hosts lack instance_data and process_id/process_name.
  if (support::host_too_old(g_host, ctx, "trace")) return 1;
  try {
    auto instance = std::make_unique<Instance>(ctx);
    instance->out = g_host->output(ctx);
    instance->process.pid = g_host->process_id();
    if (const char *name = g_host->process_name(); name != nullptr)
      instance->process.name = name;
    const char *format = g_host->format(ctx);
    const std::string_view fmt = format != nullptr && *format ? format : "text";
    if (fmt == "text")
      instance->writer = make_text_writer(instance->names, instance->args);
    else if (fmt == "chrome")
      instance->writer = make_chrome_writer(instance->names, instance->process, instance->args);
    else if (fmt == "perfetto")
      instance->writer = make_perfetto_writer(instance->names, instance->process, instance->args);
    else {
      g_host->set_error(ctx, "trace: unknown format '%s'", format);
      return 1;
    }
    if (instance->out == nullptr) {
      g_host->set_error(ctx, "trace: the host gave no output stream");
      return 1;
    }
    instance->writer->start(instance->out);
    g_host->set_instance_data(ctx, instance.release());
    return 0;
  } catch (const std::bad_alloc &) {
    g_host->set_error(ctx, "trace: out of memory");
    return 1;
  }
}

void trace_shutdown(ftjit_plugin_ctx *ctx) {
  delete support::take_instance<Instance>(g_host, ctx);
}

void trace_consume(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                   const void *event) {
  Instance *instance = instance_of(ctx);
  if (instance == nullptr || thread == nullptr || event == nullptr) return;
  // A late event would land after the closing bytes of chrome's JSON.
  if (instance->finished) return;
  try {
    // The host's ring slots are 8-byte aligned, all TraceEvent needs.
    const auto *e = static_cast<const TraceEvent *>(event);
    instance->writer->write(instance->out, *thread, *e,
                            e->has_record != 0 ? e + 1 : nullptr);
  } catch (const std::bad_alloc &) {
    g_host->log(ctx, FTJIT_LOG_ERROR, "trace: out of memory, event lost");
  }
}

// The host's way: a run of one thread's events at once.
void trace_consume_run(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                       const void *events, size_t n, size_t stride) {
  Instance *instance = instance_of(ctx);
  if (instance == nullptr || thread == nullptr || events == nullptr) return;
  if (instance->finished) return;
  try {
    instance->writer->write_run(instance->out, *thread,
                                static_cast<const uint8_t *>(events), n, stride);
  } catch (const std::bad_alloc &) {
    g_host->log(ctx, FTJIT_LOG_ERROR, "trace: out of memory, events lost");
  }
}

int trace_report(ftjit_plugin_ctx *ctx, FILE *out, const char *) {
  Instance *instance = instance_of(ctx);
  if (!support::has_instance(g_host, ctx, "trace", instance)) return 1;
  uint64_t recursion_drops = 0, event_drops = 0;
  g_host->drop_counts(ctx, &recursion_drops, &event_drops);
  try {
    if (!instance->finished) instance->writer->finish(out, event_drops);
  } catch (const std::bad_alloc &) {
    g_host->set_error(ctx, "trace: out of memory while finishing");
    return 1;
  }
  instance->finished = true;
  if (std::fflush(out) != 0 || std::ferror(out)) {
    g_host->set_error(ctx, "trace: write failed");
    return 1;
  }
  return 0;
}

constexpr ftjit_plugin kDescriptor = support::no_fp_descriptor({
    .name = "trace",
    .description =
        "entry/exit events of every traced call: function graph, Chrome "
        "JSON, Perfetto",
    .formats = kFormats,
    .thread_storage_size = sizeof(ThreadSlot),
    .event_size = sizeof(TraceEvent),
    .buffer_events = kBufferEvents,
    .init = trace_init,
    .shutdown = trace_shutdown,
    .entry = on_entry,
    .exit = on_exit,
    .consume = trace_consume,
    .report = trace_report,
    .extra_flags = FTJIT_PLUGIN_F_ARGS,
    .consume_run = trace_consume_run,
});

}  // namespace
}  // namespace ftjit_trace

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  return ftjit_plugin_support::accept_host(host, ftjit_trace::g_host,
                                           ftjit_trace::kDescriptor);
}
