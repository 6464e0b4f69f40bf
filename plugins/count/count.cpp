// SPDX-License-Identifier: MIT
// count plugin: calls per traced function, merged over threads at report.
#include "count.h"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace ftjit_count {
namespace {

constexpr int64_t kDefaultTableSize = 16384;
constexpr int64_t kMaxTableSize = int64_t(1) << 24;
constexpr int64_t kMaxThreads = 65536;

const ftjit_plugin_option kOptions[] = {
    {"table_size", FTJIT_OPTION_INT, "16384",
     "functions counted per thread (power of two; 3/4 usable, the rest go "
     "to 'other')"},
    {"max_threads", FTJIT_OPTION_INT, "256",
     "threads with their own table; calls of later threads count as 'other'"},
    {"top", FTJIT_OPTION_INT, "0", "text format: print the N most called "
                                    "functions only (0: all)"},
};
const char *const kFormats[] = {"text", "json", "tsv", nullptr};
constexpr size_t kHostSizeNeeded =
    offsetof(ftjit_host, process_name) + sizeof(ftjit_host::process_name);

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

struct FunctionCount {
  uint64_t ip;
  uint64_t calls;
  std::string name;
};

struct Totals {
  std::vector<FunctionCount> functions;
  uint64_t overflow_calls = 0;  // table full, or thread beyond max_threads
  uint64_t total_calls = 0;
};

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

void free_instance(Instance *instance) {
  std::free(instance->counters);
  std::free(instance->headers);
  delete instance;
}

int count_init(ftjit_plugin_ctx *ctx) {
  // Older hosts lack instance_data, and the event path has no other way to
  // find its instance.
  if (g_host->struct_size < kHostSizeNeeded) {
    g_host->set_error(ctx,
                      "count: the host is too old (ftjit_host of %u bytes, "
                      "need %zu: no instance data)",
                      g_host->struct_size, kHostSizeNeeded);
    return 1;
  }
  const int64_t table_size = g_host->option_int(ctx, "table_size");
  const int64_t max_threads = g_host->option_int(ctx, "max_threads");
  const int64_t top = g_host->option_int(ctx, "top");
  if (!is_power_of_two(table_size) || table_size > kMaxTableSize) {
    g_host->set_error(ctx,
                      "count: table_size must be a power of two in [1, %" PRId64
                      "], got %" PRId64,
                      kMaxTableSize, table_size);
    return 1;
  }
  if (max_threads < 1 || max_threads > kMaxThreads) {
    g_host->set_error(ctx,
                      "count: max_threads must be in [1, %" PRId64
                      "], got %" PRId64,
                      kMaxThreads, max_threads);
    return 1;
  }
  if (top < 0) {
    g_host->set_error(ctx, "count: top must be >= 0, got %" PRId64, top);
    return 1;
  }
  auto *instance = new (std::nothrow) Instance;
  if (instance == nullptr) {
    g_host->set_error(ctx, "count: out of memory");
    return 1;
  }
  instance->table_size = uint32_t(table_size);
  instance->hash_shift = 64 - uint32_t(__builtin_ctzll(uint64_t(table_size)));
  if (instance->hash_shift == 64) instance->hash_shift = 63;
  instance->load_limit =
      uint32_t(table_size - std::max<int64_t>(1, table_size / 4));
  instance->max_threads = uint32_t(max_threads);
  // calloc: untouched tables stay unbacked zero pages.
  instance->counters = static_cast<Counter *>(
      std::calloc(size_t(max_threads) * size_t(table_size), sizeof(Counter)));
  instance->headers = static_cast<TableHeader *>(
      std::calloc(size_t(max_threads), sizeof(TableHeader)));
  if (instance->counters == nullptr || instance->headers == nullptr) {
    g_host->set_error(ctx, "count: cannot allocate %" PRId64 " tables of %" PRId64
                      " slots", max_threads, table_size);
    free_instance(instance);
    return 1;
  }
  g_host->set_instance_data(ctx, instance);
  return 0;
}

void count_shutdown(ftjit_plugin_ctx *ctx) {
  Instance *instance = instance_of(ctx);
  if (instance == nullptr) return;
  g_host->set_instance_data(ctx, nullptr);
  free_instance(instance);
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

struct MergeState {
  std::vector<std::pair<uint64_t, uint64_t>> counts;  // (ip, calls), unsorted
  uint64_t overflow_calls = 0;
  const Instance *instance = nullptr;
};

void visit_thread(const ftjit_thread_info *, void *storage, void *arg) {
  auto *merge = static_cast<MergeState *>(arg);
  auto *slot = static_cast<const ThreadSlot *>(storage);
  if (slot == nullptr || slot->state != SlotState::kClaimed) return;
  for (uint32_t i = 0; i < merge->instance->table_size; ++i)
    if (slot->counters[i].ip != 0)
      merge->counts.emplace_back(slot->counters[i].ip, slot->counters[i].calls);
  merge->overflow_calls += slot->header->overflow_calls;
}

std::string function_name(ftjit_plugin_ctx *ctx, uint64_t ip) {
  if (const char *name = g_host->symbol(ctx, ip); name != nullptr && *name)
    return name;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%" PRIx64, ip);
  return hex;
}

Totals collect(ftjit_plugin_ctx *ctx, const Instance *instance) {
  MergeState merge;
  merge.instance = instance;
  g_host->for_each_thread(ctx, visit_thread, &merge);
  std::sort(merge.counts.begin(), merge.counts.end());
  Totals totals;
  for (const auto &[ip, calls] : merge.counts) {
    if (!totals.functions.empty() && totals.functions.back().ip == ip)
      totals.functions.back().calls += calls;
    else
      totals.functions.push_back({ip, calls, {}});
    totals.total_calls += calls;
  }
  for (FunctionCount &function : totals.functions)
    function.name = function_name(ctx, function.ip);
  std::sort(totals.functions.begin(), totals.functions.end(),
            [](const FunctionCount &a, const FunctionCount &b) {
              if (a.calls != b.calls) return a.calls > b.calls;
              if (a.name != b.name) return a.name < b.name;
              return a.ip < b.ip;
            });
  totals.overflow_calls = merge.overflow_calls +
                          instance->unpooled_calls.load(std::memory_order_relaxed);
  return totals;
}

// A field must not break the one-line-per-function contract of tsv.
std::string tsv_field(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return out;
}

void write_json_string(FILE *out, std::string_view text) {
  std::fputc('"', out);
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      std::fprintf(out, "\\%c", c);
    else if (c < 0x20)
      std::fprintf(out, "\\u%04x", c);
    else
      std::fputc(c, out);
  }
  std::fputc('"', out);
}

void write_text(FILE *out, const Totals &totals, uint64_t top,
                const Instance *instance, uint64_t recursion_drops) {
  size_t shown = totals.functions.size();
  if (top != 0 && top < shown) shown = size_t(top);
  std::fprintf(out, "%14s  %s\n", "CALLS", "FUNCTION");
  for (size_t i = 0; i < shown; ++i)
    std::fprintf(out, "%14" PRIu64 "  %s\n", totals.functions[i].calls,
                 totals.functions[i].name.c_str());
  if (shown < totals.functions.size())
    std::fprintf(out, "%14s  (%zu more functions)\n", "...",
                 totals.functions.size() - shown);
  std::fprintf(out, "\n%" PRIu64 " calls of %zu functions\n",
               totals.total_calls, totals.functions.size());
  if (totals.overflow_calls != 0)
    std::fprintf(out,
                 "other: %" PRIu64 " calls not attributed (a thread's table "
                 "was full: table_size=%u, or more than max_threads=%u)\n",
                 totals.overflow_calls, instance->table_size,
                 instance->max_threads);
  std::fprintf(out,
               "dropped: %" PRIu64 " calls made inside tracer callbacks "
               "(untraced)\n",
               recursion_drops);
}

void write_json(FILE *out, const Totals &totals, uint64_t recursion_drops,
                uint64_t event_drops) {
  std::fprintf(out, "{\"functions\":[");
  for (size_t i = 0; i < totals.functions.size(); ++i) {
    const FunctionCount &function = totals.functions[i];
    std::fprintf(out, "%s\n{\"name\":", i == 0 ? "" : ",");
    write_json_string(out, function.name);
    std::fprintf(out, ",\"ip\":\"0x%" PRIx64 "\",\"calls\":%" PRIu64 "}",
                 function.ip, function.calls);
  }
  std::fprintf(out,
               "],\n\"total_calls\":%" PRIu64 ",\"other_calls\":%" PRIu64
               ",\n\"dropped\":{\"recursion\":%" PRIu64 ",\"events\":%" PRIu64
               "}}\n",
               totals.total_calls, totals.overflow_calls, recursion_drops,
               event_drops);
}

int count_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  const Instance *instance = instance_of(ctx);
  if (instance == nullptr) {
    g_host->set_error(ctx, "count: report without a successful init");
    return 1;
  }
  try {
    const Totals totals = collect(ctx, instance);
    uint64_t recursion_drops = 0, event_drops = 0;
    g_host->drop_counts(ctx, &recursion_drops, &event_drops);
    const std::string_view fmt = format != nullptr ? format : "text";
    if (fmt == "tsv") {
      for (const FunctionCount &function : totals.functions)
        std::fprintf(out, "%s\t%" PRIu64 "\n", tsv_field(function.name).c_str(),
                     function.calls);
    } else if (fmt == "json") {
      write_json(out, totals, recursion_drops, event_drops);
    } else if (fmt == "text") {
      write_text(out, totals, uint64_t(g_host->option_int(ctx, "top")),
                 instance, recursion_drops);
    } else {
      g_host->set_error(ctx, "count: unknown format '%s'", format);
      return 1;
    }
  } catch (const std::bad_alloc &) {
    g_host->set_error(ctx, "count: out of memory while reporting");
    return 1;
  }
  return std::ferror(out) ? (g_host->set_error(ctx, "count: write failed"), 1)
                          : 0;
}

const ftjit_plugin kDescriptor = {
    sizeof(ftjit_plugin),
    FTJIT_PLUGIN_ABI_VERSION,
    "count",
    "calls per traced function, all threads merged",
    kOptions,
    sizeof kOptions / sizeof kOptions[0],
    FTJIT_PLUGIN_F_NO_FP,
    kFormats,
    sizeof(ThreadSlot),
    0,
    0,
    0,
    count_init,
    count_shutdown,
    on_entry,
    nullptr,
    nullptr,
    count_report,
};

}  // namespace
}  // namespace ftjit_count

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  if (host == nullptr || host->abi_version != FTJIT_PLUGIN_ABI_VERSION)
    return nullptr;
  ftjit_count::g_host = host;
  return &ftjit_count::kDescriptor;
}
