// SPDX-License-Identifier: MIT
// count plugin: calls per traced function, merged over threads at report.
#include "count.h"

#include <algorithm>
#include <cstddef>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "plugin_support.h"

namespace ftjit_count {
namespace {

namespace support = ftjit_plugin_support;

constexpr int64_t kMaxTableSize = int64_t(1) << 24;

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

int count_init(ftjit_plugin_ctx *ctx) {
  if (support::host_too_old(g_host, ctx, "count")) return 1;
  support::PoolOptions pool;
  if (!support::read_pool_options(g_host, ctx, "count", kMaxTableSize, &pool))
    return 1;
  const int64_t top = g_host->option_int(ctx, "top");
  if (top < 0) {
    g_host->set_error(ctx, "count: top must be >= 0, got %" PRId64, top);
    return 1;
  }
  Instance *instance =
      support::new_pool_instance<Instance>(g_host, ctx, "count", pool, "slots");
  if (instance == nullptr) return 1;
  g_host->set_instance_data(ctx, instance);
  return 0;
}

void count_shutdown(ftjit_plugin_ctx *ctx) {
  support::delete_pool_instance(support::take_instance<Instance>(g_host, ctx));
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

// The calls counted in the code the sites call (inline work), beside those
// the callback counted in the threads' tables.
const ftjit_plugin_inline kInline = {sizeof(ftjit_plugin_inline), FTJIT_PLUGIN_INLINE_VERSION,
                                     FTJIT_PLUGIN_INLINE_COUNT, FTJIT_PLUGIN_INLINE_NONE};

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
    if (slot->entries[i].ip != 0)
      merge->counts.emplace_back(slot->entries[i].ip, slot->entries[i].calls);
  merge->overflow_calls += slot->header->overflow_calls;
}

void add_inline(uint64_t ip, uint64_t calls, void *arg) {
  static_cast<MergeState *>(arg)->counts.emplace_back(ip, calls);
}

Totals collect(ftjit_plugin_ctx *ctx, const Instance *instance) {
  MergeState merge;
  merge.instance = instance;
  g_host->for_each_thread(ctx, visit_thread, &merge);
  if (g_host->struct_size >= offsetof(ftjit_host, inline_counts) + sizeof(g_host->inline_counts))
    g_host->inline_counts(ctx, add_inline, &merge);
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
    function.name = support::symbol_or_hex(g_host, ctx, function.ip);
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
    support::write_json_string(out, function.name);
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
  if (!support::has_instance(g_host, ctx, "count", instance)) return 1;
  return support::guarded_report(g_host, ctx, "count", out, [&] {
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
    return 0;
  });
}

constexpr ftjit_plugin kDescriptor = support::no_fp_descriptor({
    .name = "count",
    .description = "calls per traced function, all threads merged",
    .options = kOptions,
    .n_options = std::size(kOptions),
    .formats = kFormats,
    .thread_storage_size = sizeof(ThreadSlot),
    .init = count_init,
    .shutdown = count_shutdown,
    .entry = on_entry,
    .report = count_report,
    .inline_work = &kInline,
});

}  // namespace
}  // namespace ftjit_count

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  return ftjit_plugin_support::accept_host(host, ftjit_count::g_host,
                                           ftjit_count::kDescriptor);
}
