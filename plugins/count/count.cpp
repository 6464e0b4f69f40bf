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
  uint64_t key;
  uint64_t calls;
  std::string name;
  support::ArgKeyShown value;  // --by-arg: the group's value, if ip has it
};

struct Totals {
  std::vector<FunctionCount> functions;  // with --by-arg: one per (function, value)
  size_t distinct_functions = 0;
  uint64_t overflow_calls = 0;  // table full, or thread beyond max_threads
  uint64_t total_calls = 0;
  std::string by_arg;  // --by-arg NAME, "" without
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
  instance->keyed = !support::arg_key_name(g_host, ctx).empty();
  if (g_host->struct_size > offsetof(ftjit_host, record_info))
    instance->record = g_host->record_info(ctx);
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

struct Count {
  uint64_t ip, key, calls;
  bool operator<(const Count &o) const {
    return ip != o.ip ? ip < o.ip : key < o.key;
  }
};

struct MergeState {
  std::vector<Count> counts;  // unsorted
  uint64_t overflow_calls = 0;
  const Instance *instance = nullptr;
};

void visit_thread(const ftjit_thread_info *, void *storage, void *arg) {
  auto *merge = static_cast<MergeState *>(arg);
  auto *slot = static_cast<const ThreadSlot *>(storage);
  if (slot == nullptr || slot->state != SlotState::kClaimed) return;
  for (uint32_t i = 0; i < merge->instance->table_size; ++i)
    if (slot->entries[i].ip != 0)
      merge->counts.push_back(
          {slot->entries[i].ip, slot->entries[i].key, slot->entries[i].calls});
  merge->overflow_calls += slot->header->overflow_calls;
}

void add_inline(uint64_t ip, uint64_t calls, void *arg) {
  static_cast<MergeState *>(arg)->counts.push_back({ip, 0, calls});
}

Totals collect(ftjit_plugin_ctx *ctx, const Instance *instance) {
  MergeState merge;
  merge.instance = instance;
  g_host->for_each_thread(ctx, visit_thread, &merge);
  if (g_host->struct_size >= offsetof(ftjit_host, inline_counts) + sizeof(g_host->inline_counts))
    g_host->inline_counts(ctx, add_inline, &merge);
  std::sort(merge.counts.begin(), merge.counts.end());
  Totals totals;
  totals.by_arg = support::arg_key_name(g_host, ctx);
  for (const Count &c : merge.counts) {
    if (!totals.functions.empty() && totals.functions.back().ip == c.ip &&
        totals.functions.back().key == c.key) {
      totals.functions.back().calls += c.calls;
    } else {
      if (totals.functions.empty() || totals.functions.back().ip != c.ip)
        ++totals.distinct_functions;
      totals.functions.push_back({c.ip, c.key, c.calls, {}, {}});
    }
    totals.total_calls += c.calls;
  }
  for (FunctionCount &function : totals.functions) {
    function.name = support::symbol_or_hex(g_host, ctx, function.ip);
    if (!totals.by_arg.empty())
      function.value = support::arg_key_shown(g_host, ctx, function.ip, function.key);
  }
  std::sort(totals.functions.begin(), totals.functions.end(),
            [](const FunctionCount &a, const FunctionCount &b) {
              if (a.calls != b.calls) return a.calls > b.calls;
              if (a.name != b.name) return a.name < b.name;
              if (a.ip != b.ip) return a.ip < b.ip;
              if (a.value.text != b.value.text) return a.value.text < b.value.text;
              return a.key < b.key;
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

// A row's label: the function, and with --by-arg the value of its group
// ("args_lookup [c=RED]"); a function without the parameter is alone.
std::string row_name(const Totals &totals, const FunctionCount &function) {
  if (!function.value.has) return function.name;
  return function.name + " [" + totals.by_arg + "=" + function.value.text + "]";
}

void write_text(FILE *out, const Totals &totals, uint64_t top,
                const Instance *instance, uint64_t recursion_drops) {
  size_t shown = totals.functions.size();
  if (top != 0 && top < shown) shown = size_t(top);
  if (totals.by_arg.empty())
    std::fprintf(out, "%14s  %s\n", "CALLS", "FUNCTION");
  else
    std::fprintf(out, "%14s  %s [%s=VALUE]\n", "CALLS", "FUNCTION",
                 totals.by_arg.c_str());
  for (size_t i = 0; i < shown; ++i)
    std::fprintf(out, "%14" PRIu64 "  %s\n", totals.functions[i].calls,
                 row_name(totals, totals.functions[i]).c_str());
  if (shown < totals.functions.size())
    std::fprintf(out, "%14s  (%zu more %s)\n", "...",
                 totals.functions.size() - shown,
                 totals.by_arg.empty() ? "functions" : "rows");
  if (totals.by_arg.empty())
    std::fprintf(out, "\n%" PRIu64 " calls of %zu functions\n",
                 totals.total_calls, totals.functions.size());
  else
    std::fprintf(out, "\n%" PRIu64 " calls of %zu functions, in %zu rows by %s\n",
                 totals.total_calls, totals.distinct_functions,
                 totals.functions.size(), totals.by_arg.c_str());
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
  // What the session narrowed: sampling and the duration filter leave
  // count alone (FTJIT_PLUGIN_F_EVERY_CALL); depth and triggers do not.
  const ftjit_record_info *record = instance->record;
  if (record == nullptr) return;
  if (record->max_depth != 0)
    std::fprintf(out, "recorded: calls at most %u traced frames deep\n",
                 record->max_depth);
  if (record->triggers != 0)
    std::fprintf(out, "recorded: between the session's start and stop triggers\n");
  if (record->sample_period > 1 && record->applies == 0)
    std::fprintf(out,
                 "exact: the other plugins sample 1 call in %u of each "
                 "function; these counts are of every call\n",
                 record->sample_period);
  if (record->min_duration_ns != 0 && record->applies == 0)
    std::fprintf(out,
                 "exact: the other plugins keep calls of at least %" PRIu64
                 " ns; these counts are of every call\n",
                 record->min_duration_ns);
}

void write_json(FILE *out, const Totals &totals, uint64_t recursion_drops,
                uint64_t event_drops) {
  std::fprintf(out, "{\"functions\":[");
  for (size_t i = 0; i < totals.functions.size(); ++i) {
    const FunctionCount &function = totals.functions[i];
    std::fprintf(out, "%s\n{\"name\":", i == 0 ? "" : ",");
    support::write_json_string(out, function.name);
    std::fprintf(out, ",\"ip\":\"0x%" PRIx64 "\",\"calls\":%" PRIu64,
                 function.ip, function.calls);
    if (function.value.has) {
      std::fputs(",\"arg\":", out);
      support::write_json_string(out, totals.by_arg);
      std::fprintf(out, ",\"value\":%s,\"text\":", function.value.json.c_str());
      support::write_json_string(out, function.value.text);
    }
    std::fputs("}", out);
  }
  std::fputs("],\n", out);
  if (!totals.by_arg.empty()) {
    std::fputs("\"by_arg\":", out);
    support::write_json_string(out, totals.by_arg);
    std::fputs(",", out);
  }
  std::fprintf(out,
               "\"total_calls\":%" PRIu64 ",\"other_calls\":%" PRIu64
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
        std::fprintf(out, "%s\t%" PRIu64 "\n",
                     tsv_field(row_name(totals, function)).c_str(), function.calls);
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
    .extra_flags = FTJIT_PLUGIN_F_EVERY_CALL,
});

}  // namespace
}  // namespace ftjit_count

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  return ftjit_plugin_support::accept_host(host, ftjit_count::g_host,
                                           ftjit_count::kDescriptor);
}
