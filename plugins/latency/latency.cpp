// SPDX-License-Identifier: MIT
// latency plugin: entry-to-return time per traced function as log2
// histograms, printed like bpftrace's hist(), with estimated percentiles.
#include "latency.h"

#include <algorithm>
#include <cstddef>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "plugin_support.h"

namespace ftjit_latency {
namespace {

namespace support = ftjit_plugin_support;

constexpr int64_t kMaxTableSize = int64_t(1) << 20;

const ftjit_plugin_option kOptions[] = {
    {"table_size", FTJIT_OPTION_INT, "1024",
     "functions timed per thread (power of two; 3/4 usable)"},
    {"max_threads", FTJIT_OPTION_INT, "256",
     "threads with their own table; later threads are not timed"},
};
const char *const kFormats[] = {"text", "json", nullptr};

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

int latency_init(ftjit_plugin_ctx *ctx) {
  if (support::host_too_old(g_host, ctx, "latency")) return 1;
  support::PoolOptions pool;
  if (!support::read_pool_options(g_host, ctx, "latency", kMaxTableSize, &pool))
    return 1;
  Instance *instance = support::new_pool_instance<Instance>(
      g_host, ctx, "latency", pool, "functions");
  if (instance == nullptr) return 1;
  instance->keyed = !support::arg_key_name(g_host, ctx).empty();
  g_host->set_instance_data(ctx, instance);
  return 0;
}

void latency_shutdown(ftjit_plugin_ctx *ctx) {
  support::delete_pool_instance(support::take_instance<Instance>(g_host, ctx));
}

// ---------------------------------------------------------------------------
// Merge and percentiles
// ---------------------------------------------------------------------------

struct Function {
  FunctionHistogram histogram;
  std::string name;
  support::ArgKeyShown value;  // --by-arg: the group's value, if ip has it
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
};

struct Merged {
  std::vector<FunctionHistogram> by_ip;  // one per ip after merging
  TableHeader totals{};
  const Instance *instance = nullptr;
};

void visit_thread(const ftjit_thread_info *, void *storage, void *arg) {
  auto *merged = static_cast<Merged *>(arg);
  auto *slot = static_cast<const ThreadSlot *>(storage);
  if (slot == nullptr || slot->state != SlotState::kClaimed) return;
  for (uint32_t i = 0; i < merged->instance->table_size; ++i)
    if (slot->entries[i].ip != 0) merged->by_ip.push_back(slot->entries[i]);
  merged->totals.overflow_calls += slot->header->overflow_calls;
  merged->totals.unwound += slot->header->unwound;
  merged->totals.unmatched_exits += slot->header->unmatched_exits;
  merged->totals.too_deep += slot->header->too_deep;
}

// The calls the host timed in the code the sites call (inline work),
// beside those the callbacks timed.
const ftjit_plugin_inline kInline = {sizeof(ftjit_plugin_inline), FTJIT_PLUGIN_INLINE_VERSION,
                                     FTJIT_PLUGIN_INLINE_LATENCY, FTJIT_PLUGIN_INLINE_LATENCY};
static_assert(kBuckets == FTJIT_PLUGIN_BUCKETS);

void add_inline(const ftjit_plugin_histogram *h, void *arg) {
  auto *merged = static_cast<Merged *>(arg);
  merged->totals.unwound += h->unwound;
  if (h->calls == 0) return;
  FunctionHistogram f{};
  f.ip = h->ip;
  f.calls = h->calls;
  f.total_ns = h->total_ns;
  f.max_ns = h->max_ns;
  for (int b = 0; b < kBuckets; ++b) f.buckets[b] = h->buckets[b];
  merged->by_ip.push_back(f);
}

uint64_t bucket_low(int bucket) { return bucket == 0 ? 0 : uint64_t(1) << (bucket - 1); }

// The value of rank `percent`% (nearest-rank), interpolated linearly inside
// its log2 bucket and capped by the exact maximum: an estimate, good to the
// bucket's width.
uint64_t estimate_percentile(const FunctionHistogram &h, unsigned percent) {
  if (h.calls == 0) return 0;
  const uint64_t rank =
      uint64_t((unsigned __int128)h.calls * percent / 100 +
               ((unsigned __int128)h.calls * percent % 100 != 0));
  uint64_t below = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if (h.buckets[b] == 0 || below + h.buckets[b] < rank) {
      below += h.buckets[b];
      continue;
    }
    if (b <= 1) return uint64_t(b);  // [0] and [1] hold one value each
    const unsigned __int128 width = bucket_low(b);  // hi - lo = lo
    const uint64_t estimate =
        bucket_low(b) + uint64_t(width * (rank - below) / h.buckets[b]);
    return std::min(estimate, h.max_ns);
  }
  return h.max_ns;
}

std::vector<Function> collect(ftjit_plugin_ctx *ctx, Merged &merged) {
  g_host->for_each_thread(ctx, visit_thread, &merged);
  if (g_host->struct_size >= offsetof(ftjit_host, inline_histograms) + sizeof(g_host->inline_histograms))
    g_host->inline_histograms(ctx, add_inline, &merged);
  std::sort(merged.by_ip.begin(), merged.by_ip.end(),
            [](const FunctionHistogram &a, const FunctionHistogram &b) {
              return a.ip != b.ip ? a.ip < b.ip : a.key < b.key;
            });
  std::vector<Function> functions;
  for (const FunctionHistogram &h : merged.by_ip) {
    if (!functions.empty() && functions.back().histogram.ip == h.ip &&
        functions.back().histogram.key == h.key) {
      FunctionHistogram &sum = functions.back().histogram;
      sum.calls += h.calls;
      sum.total_ns += h.total_ns;
      sum.max_ns = std::max(sum.max_ns, h.max_ns);
      for (int b = 0; b < kBuckets; ++b) sum.buckets[b] += h.buckets[b];
    } else {
      functions.push_back({h, {}, {}, 0, 0});
    }
  }
  const std::string by_arg = support::arg_key_name(g_host, ctx);
  for (Function &f : functions) {
    f.name = support::symbol_or_hex(g_host, ctx, f.histogram.ip);
    if (!by_arg.empty())
      f.value = support::arg_key_shown(g_host, ctx, f.histogram.ip, f.histogram.key);
    f.p50_ns = estimate_percentile(f.histogram, 50);
    f.p99_ns = estimate_percentile(f.histogram, 99);
  }
  // Where the time went first.
  std::sort(functions.begin(), functions.end(),
            [](const Function &a, const Function &b) {
              if (a.histogram.total_ns != b.histogram.total_ns)
                return a.histogram.total_ns > b.histogram.total_ns;
              if (a.name != b.name) return a.name < b.name;
              return a.histogram.key < b.histogram.key;
            });
  return functions;
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

// bpftrace's power-of-two labels: 512, 1K, 2M ... with K = 1024.
std::string power_of_two_label(int exponent) {
  static const char kSuffix[] = " KMGTPE";
  const int unit = exponent / 10;
  char text[24];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%llu", 1ull << exponent);
  else
    std::snprintf(text, sizeof text, "%llu%c", 1ull << (exponent % 10),
                  kSuffix[unit]);
  return text;
}

std::string bucket_label(int bucket) {
  if (bucket <= 1) return bucket == 0 ? "[0]" : "[1]";
  return "[" + power_of_two_label(bucket - 1) + ", " +
         power_of_two_label(bucket) + ")";
}

void write_histogram(FILE *out, const FunctionHistogram &h) {
  constexpr int kBarWidth = 52;
  int first = kBuckets, last = -1;
  uint64_t peak = 0;
  for (int b = 0; b < kBuckets; ++b) {
    if (h.buckets[b] == 0) continue;
    first = std::min(first, b);
    last = b;
    peak = std::max(peak, h.buckets[b]);
  }
  for (int b = first; b <= last; ++b) {
    const int bar = int((unsigned __int128)h.buckets[b] * kBarWidth / peak);
    std::fprintf(out, "%-16s%8" PRIu64 " |%s%*s|\n", bucket_label(b).c_str(),
                 h.buckets[b], std::string(size_t(bar), '@').c_str(),
                 kBarWidth - bar, "");
  }
}

void write_text(FILE *out, const std::vector<Function> &functions,
                const TableHeader &totals, uint64_t unpooled,
                uint64_t recursion_drops, const std::string &by_arg) {
  for (const Function &f : functions) {
    // --by-arg: "@args_lookup [c=RED]:", one histogram per value.
    if (f.value.has)
      std::fprintf(out, "@%s [%s=%s]:\n", f.name.c_str(), by_arg.c_str(),
                   f.value.text.c_str());
    else
      std::fprintf(out, "@%s:\n", f.name.c_str());
    write_histogram(out, f.histogram);
    std::fprintf(out,
                 "count %" PRIu64 ", p50 ~%" PRIu64 " ns, p99 ~%" PRIu64
                 " ns, max %" PRIu64 " ns, total %" PRIu64 " ns\n\n",
                 f.histogram.calls, f.p50_ns, f.p99_ns, f.histogram.max_ns,
                 f.histogram.total_ns);
  }
  std::fprintf(out,
               "durations in ns; p50/p99 are estimated inside the log2 "
               "buckets, max and total are exact\n");
  std::fprintf(out,
               "not timed: %" PRIu64 " unwound (exception/longjmp), %" PRIu64
               " deeper than %u frames, %" PRIu64 " with the table full, %" PRIu64
               " on threads beyond max_threads, %" PRIu64
               " exits without entry\n",
               totals.unwound, totals.too_deep, kMaxDepth, totals.overflow_calls,
               unpooled, totals.unmatched_exits);
  std::fprintf(out,
               "dropped: %" PRIu64 " calls made inside tracer callbacks "
               "(untraced)\n",
               recursion_drops);
}

void write_json(FILE *out, const std::vector<Function> &functions,
                const TableHeader &totals, uint64_t unpooled,
                uint64_t recursion_drops, uint64_t event_drops,
                const std::string &by_arg) {
  std::fprintf(out, "{\"unit\":\"ns\",\"percentiles\":\"estimated within "
                    "log2 buckets\",");
  if (!by_arg.empty()) {
    std::fputs("\"by_arg\":", out);
    support::write_json_string(out, by_arg);
    std::fputs(",", out);
  }
  std::fputs("\"functions\":[", out);
  for (size_t i = 0; i < functions.size(); ++i) {
    const Function &f = functions[i];
    std::fprintf(out, "%s\n{\"name\":", i == 0 ? "" : ",");
    support::write_json_string(out, f.name);
    if (f.value.has) {
      std::fputs(",\"arg\":", out);
      support::write_json_string(out, by_arg);
      std::fprintf(out, ",\"value\":%s,\"text\":", f.value.json.c_str());
      support::write_json_string(out, f.value.text);
    }
    std::fprintf(out,
                 ",\"ip\":\"0x%" PRIx64 "\",\"count\":%" PRIu64
                 ",\"total_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
                 ",\"p50_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 ",\"buckets\":[",
                 f.histogram.ip, f.histogram.calls, f.histogram.total_ns,
                 f.histogram.max_ns, f.p50_ns, f.p99_ns);
    bool first = true;
    for (int b = 0; b < kBuckets; ++b) {
      if (f.histogram.buckets[b] == 0) continue;
      // The top bucket's bound 2^64 does not fit a uint64: it is null.
      if (b == kBuckets - 1)
        std::fprintf(out, "%s{\"lo\":%" PRIu64 ",\"hi\":null,\"count\":%" PRIu64 "}",
                     first ? "" : ",", bucket_low(b), f.histogram.buckets[b]);
      else
        std::fprintf(out, "%s{\"lo\":%" PRIu64 ",\"hi\":%" PRIu64
                     ",\"count\":%" PRIu64 "}",
                     first ? "" : ",", bucket_low(b), bucket_low(b + 1),
                     f.histogram.buckets[b]);
      first = false;
    }
    std::fputs("]}", out);
  }
  std::fprintf(out,
               "],\n\"not_timed\":{\"unwound\":%" PRIu64 ",\"too_deep\":%" PRIu64
               ",\"table_full\":%" PRIu64 ",\"threads_over_limit\":%" PRIu64
               ",\"exits_without_entry\":%" PRIu64 "},\n"
               "\"dropped\":{\"recursion\":%" PRIu64 ",\"events\":%" PRIu64
               "}}\n",
               totals.unwound, totals.too_deep, totals.overflow_calls, unpooled,
               totals.unmatched_exits, recursion_drops, event_drops);
}

int latency_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  const Instance *instance = instance_of(ctx);
  if (!support::has_instance(g_host, ctx, "latency", instance)) return 1;
  return support::guarded_report(g_host, ctx, "latency", out, [&] {
    Merged merged;
    merged.instance = instance;
    const std::vector<Function> functions = collect(ctx, merged);
    const uint64_t unpooled =
        instance->unpooled_calls.load(std::memory_order_relaxed);
    uint64_t recursion_drops = 0, event_drops = 0;
    g_host->drop_counts(ctx, &recursion_drops, &event_drops);
    const std::string_view fmt = format != nullptr ? format : "text";
    if (fmt == "text") {
      write_text(out, functions, merged.totals, unpooled, recursion_drops,
                 support::arg_key_name(g_host, ctx));
    } else if (fmt == "json") {
      write_json(out, functions, merged.totals, unpooled, recursion_drops,
                 event_drops, support::arg_key_name(g_host, ctx));
    } else {
      g_host->set_error(ctx, "latency: unknown format '%s'", format);
      return 1;
    }
    return 0;
  });
}

constexpr ftjit_plugin kDescriptor = support::no_fp_descriptor({
    .name = "latency",
    .description =
        "entry-to-return time per traced function: log2 histograms, "
        "p50/p99/max",
    .options = kOptions,
    .n_options = std::size(kOptions),
    .formats = kFormats,
    .thread_storage_size = sizeof(ThreadSlot),
    .init = latency_init,
    .shutdown = latency_shutdown,
    .entry = on_entry,
    .exit = on_exit,
    .report = latency_report,
    .inline_work = &kInline,
});

}  // namespace
}  // namespace ftjit_latency

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  return ftjit_plugin_support::accept_host(host, ftjit_latency::g_host,
                                           ftjit_latency::kDescriptor);
}
