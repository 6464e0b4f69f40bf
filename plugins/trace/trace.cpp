// SPDX-License-Identifier: MIT
// trace plugin: every entry and exit of traced functions, timestamped,
// streamed by the host's writer thread to text, Chrome JSON or Perfetto.
#include "trace_writers.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace ftjit_trace {

const std::string &NameCache::name(uint64_t ip) {
  auto [it, fresh] = names_.try_emplace(ip);
  if (fresh) {
    if (const char *symbol = g_host->symbol(ctx_, ip); symbol != nullptr && *symbol) {
      it->second = symbol;
    } else {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%" PRIx64, ip);
      it->second = hex;
    }
  }
  return it->second;
}

namespace {

const char *const kFormats[] = {"text", "chrome", "perfetto", nullptr};
// 2 MiB per thread at 32 bytes an event: the writer has milliseconds of
// burst to catch up before a thread drops.
constexpr uint32_t kBufferEvents = 65536;

struct Instance {
  explicit Instance(ftjit_plugin_ctx *c) : ctx(c), names(c) {}
  ftjit_plugin_ctx *ctx;
  std::mutex mutex;  // consume and report; never taken on the event path
  NameCache names;
  ProcessInfo process;
  std::unique_ptr<Writer> writer;
  FILE *out = nullptr;
  bool finished = false;
};

// The SDK gives no slot for plugin data in ctx; only the writer thread and
// the lifecycle calls look instances up, so a lock is fine here.
std::mutex g_instances_mutex;
std::vector<Instance *> g_instances;

Instance *find_instance(ftjit_plugin_ctx *ctx) {
  std::lock_guard<std::mutex> lock(g_instances_mutex);
  for (Instance *instance : g_instances)
    if (instance->ctx == ctx) return instance;
  return nullptr;
}

ProcessInfo this_process() {
  ProcessInfo process;
  process.pid = int32_t(getpid());
  if (FILE *comm = std::fopen("/proc/self/comm", "r")) {
    char name[64] = {};
    if (std::fgets(name, sizeof name, comm) != nullptr) {
      name[std::strcspn(name, "\n")] = '\0';
      process.name = name;
    }
    std::fclose(comm);
  }
  return process;
}

int trace_init(ftjit_plugin_ctx *ctx) {
  try {
    auto instance = std::make_unique<Instance>(ctx);
    instance->out = g_host->output(ctx);
    instance->process = this_process();
    const char *format = g_host->format(ctx);
    const std::string_view fmt = format != nullptr && *format ? format : "text";
    if (fmt == "text")
      instance->writer = make_text_writer(instance->names);
    else if (fmt == "chrome")
      instance->writer = make_chrome_writer(instance->names, instance->process);
    else if (fmt == "perfetto")
      instance->writer = make_perfetto_writer(instance->names, instance->process);
    else {
      g_host->set_error(ctx, "trace: unknown format '%s'", format);
      return 1;
    }
    if (instance->out == nullptr) {
      g_host->set_error(ctx, "trace: the host gave no output stream");
      return 1;
    }
    instance->writer->start(instance->out);
    std::lock_guard<std::mutex> lock(g_instances_mutex);
    g_instances.push_back(instance.release());
    return 0;
  } catch (const std::bad_alloc &) {
    g_host->set_error(ctx, "trace: out of memory");
    return 1;
  }
}

void trace_shutdown(ftjit_plugin_ctx *ctx) {
  std::lock_guard<std::mutex> lock(g_instances_mutex);
  auto it = std::find_if(g_instances.begin(), g_instances.end(),
                         [ctx](Instance *i) { return i->ctx == ctx; });
  if (it == g_instances.end()) return;
  delete *it;
  g_instances.erase(it);
}

void trace_consume(ftjit_plugin_ctx *ctx, const ftjit_thread_info *thread,
                   const void *event) {
  Instance *instance = find_instance(ctx);
  if (instance == nullptr || thread == nullptr || event == nullptr) return;
  TraceEvent copy;  // the ring slot need not be aligned for TraceEvent
  std::memcpy(&copy, event, sizeof copy);
  std::lock_guard<std::mutex> lock(instance->mutex);
  if (instance->finished) return;
  try {
    instance->writer->write(instance->out, *thread, copy);
  } catch (const std::bad_alloc &) {
    g_host->log(ctx, FTJIT_LOG_ERROR, "trace: out of memory, event lost");
  }
}

int trace_report(ftjit_plugin_ctx *ctx, FILE *out, const char *) {
  Instance *instance = find_instance(ctx);
  if (instance == nullptr) {
    g_host->set_error(ctx, "trace: report without a successful init");
    return 1;
  }
  uint64_t recursion_drops = 0, event_drops = 0;
  g_host->drop_counts(ctx, &recursion_drops, &event_drops);
  std::lock_guard<std::mutex> lock(instance->mutex);
  if (out == nullptr) out = instance->out;
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

const ftjit_plugin kDescriptor = {
    sizeof(ftjit_plugin),
    FTJIT_PLUGIN_ABI_VERSION,
    "trace",
    "entry/exit events of every traced call: function graph, Chrome JSON, "
    "Perfetto",
    nullptr,
    0,
    FTJIT_PLUGIN_F_NO_FP,
    kFormats,
    sizeof(ThreadSlot),
    sizeof(TraceEvent),
    kBufferEvents,
    0,
    trace_init,
    trace_shutdown,
    on_entry,
    on_exit,
    trace_consume,
    trace_report,
};

}  // namespace
}  // namespace ftjit_trace

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  if (host == nullptr || host->abi_version != FTJIT_PLUGIN_ABI_VERSION)
    return nullptr;
  ftjit_trace::g_host = host;
  return &ftjit_trace::kDescriptor;
}
