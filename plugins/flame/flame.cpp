// SPDX-License-Identifier: MIT
// flame plugin: calls per distinct call stack, as folded stacks
// (`outer;inner;leaf COUNT`) for flamegraph.pl, speedscope or Perfetto.
// A count is a number of function entries, not of time samples.
#include "flame.h"

#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flame_speedscope.h"
#include "flame_svg.h"
#include "plugin_support.h"

namespace ftjit_flame {
namespace {

namespace support = ftjit_plugin_support;

constexpr int64_t kMaxTableSize = int64_t(1) << 24;

const ftjit_plugin_option kOptions[] = {
    {"table_size", FTJIT_OPTION_INT, "16384",
     "distinct stacks per thread (power of two; 3/4 usable)"},
    {"max_threads", FTJIT_OPTION_INT, "256",
     "threads with their own table; later threads are not counted"},
    {"max_depth", FTJIT_OPTION_INT, "64",
     "frames kept per stack (at most 256); deeper calls count as [truncated]"},
    {"per_thread", FTJIT_OPTION_BOOL, "false",
     "start each stack with a `name-tid` frame for its thread"},
    {"weight", FTJIT_OPTION_STRING, "time",
     "what a stack weighs: `time` (its own time in ns, entry to exit, "
     "callees' time excluded) or `calls`"},
};
const char *const kFormats[] = {"folded", "json", "svg", "speedscope", nullptr};

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

int flame_init(ftjit_plugin_ctx *ctx) {
  if (support::host_too_old(g_host, ctx, "flame")) return 1;
  support::PoolOptions pool;
  if (!support::read_pool_options(g_host, ctx, "flame", kMaxTableSize, &pool))
    return 1;
  const int64_t max_depth = g_host->option_int(ctx, "max_depth");
  if (max_depth < 1 || max_depth > int64_t(kMaxDepthLimit)) {
    g_host->set_error(ctx, "flame: max_depth must be in [1, %u], got %" PRId64,
                      kMaxDepthLimit, max_depth);
    return 1;
  }
  const char *weight = g_host->option_string(ctx, "weight");
  const std::string_view w = weight != nullptr ? weight : "time";
  if (w != "time" && w != "calls") {
    g_host->set_error(ctx, "flame: weight must be `time` or `calls`, got '%s'",
                      weight != nullptr ? weight : "");
    return 1;
  }
  const bool by_time = w == "time";
  Instance *instance =
      support::new_pool_instance<Instance>(g_host, ctx, "flame", pool, "stacks");
  if (instance == nullptr) return 1;
  instance->max_depth = uint32_t(max_depth);
  instance->by_time = by_time;
  g_host->set_instance_data(ctx, instance);
  return 0;
}

void flame_shutdown(ftjit_plugin_ctx *ctx) {
  support::delete_pool_instance(support::take_instance<Instance>(g_host, ctx));
}

// ---------------------------------------------------------------------------
// Report: every thread's call tree, folded into stacks of names
// ---------------------------------------------------------------------------

struct Folding {
  ftjit_plugin_ctx *ctx = nullptr;
  const Instance *instance = nullptr;
  bool per_thread = false;
  std::unordered_map<uint64_t, std::string> names;  // ip -> frame text
  std::map<std::string, Weights> stacks;            // folded stack -> weights
  uint64_t unmatched_exits = 0;
};

// A frame must not contain the folded format's separators.
std::string frame_text(std::string_view name) {
  std::string text(name);
  for (char &c : text)
    if (c == ';') c = ':';
    else if (c == '\n' || c == '\r') c = ' ';
  return text;
}

const std::string &frame_name(Folding &folding, uint64_t ip) {
  auto [it, fresh] = folding.names.try_emplace(ip);
  if (!fresh) return it->second;
  // A hex address holds no separator: frame_text keeps it as it is.
  it->second = ip == kTruncatedIp
                   ? "[truncated]"
                   : frame_text(support::symbol_or_hex(g_host, folding.ctx, ip));
  return it->second;
}

void fold_thread(const ftjit_thread_info *thread, void *storage, void *arg) {
  auto *folding = static_cast<Folding *>(arg);
  auto *slot = static_cast<const ThreadSlot *>(storage);
  if (slot == nullptr || slot->state != SlotState::kClaimed) return;
  std::string prefix;
  if (folding->per_thread) {
    char tid[16];
    std::snprintf(tid, sizeof tid, "-%" PRId32, thread->tid);
    prefix = frame_text(thread->name != nullptr ? thread->name : "") + tid + ";";
  }
  // Each node's callees' time, by node id (0: the root), for self times.
  const uint32_t size = folding->instance->table_size;
  std::vector<uint64_t> callees_ns(size + 1, 0);
  for (uint32_t i = 0; i < size; ++i) {
    const Node &node = slot->entries[i];
    if (node.ip != 0 && node.parent <= size) callees_ns[node.parent] += node.total_ns;
  }
  std::vector<uint64_t> path;
  for (uint32_t i = 0; i < size; ++i) {
    const Node &node = slot->entries[i];
    if (node.ip == 0 || node.calls == 0) continue;
    path.clear();
    for (uint32_t id = i + 1; id != 0; id = slot->entries[id - 1].parent)
      path.push_back(slot->entries[id - 1].ip);
    std::string stack = prefix;
    for (auto ip = path.rbegin(); ip != path.rend(); ++ip) {
      if (ip != path.rbegin()) stack += ';';
      stack += frame_name(*folding, *ip);
    }
    Weights &w = folding->stacks[stack];
    w.calls += node.calls;
    w.total_ns += node.total_ns;
    // Clocks of two cores may disagree by a little: never below zero.
    const uint64_t callees = callees_ns[i + 1];
    w.self_ns += node.total_ns > callees ? node.total_ns - callees : 0;
  }
  if (slot->header->lost_calls != 0)
    folding->stacks[prefix + "[table full]"].calls += slot->header->lost_calls;
  folding->unmatched_exits += slot->header->unmatched_exits;
}

void write_json(FILE *out, const Folding &folding, uint64_t recursion_drops,
                uint64_t event_drops) {
  const bool by_time = folding.instance->by_time;
  std::fputs(by_time ? "{\"unit\":\"ns\",\"stacks\":[" : "{\"unit\":\"calls\",\"stacks\":[", out);
  bool first = true;
  for (const auto &[stack, w] : folding.stacks) {
    std::fputs(first ? "\n{\"frames\":[" : ",\n{\"frames\":[", out);
    first = false;
    size_t begin = 0;
    for (;;) {
      const size_t end = stack.find(';', begin);
      support::write_json_string(out, std::string_view(stack).substr(
                                 begin, end == std::string::npos ? end : end - begin));
      if (end == std::string::npos) break;
      std::fputc(',', out);
      begin = end + 1;
    }
    std::fprintf(out, "],\"calls\":%" PRIu64, w.calls);
    if (by_time)
      std::fprintf(out, ",\"total_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64, w.total_ns, w.self_ns);
    std::fputc('}', out);
  }
  std::fprintf(out,
               "],\n\"exits_without_entry\":%" PRIu64
               ",\"dropped\":{\"recursion\":%" PRIu64 ",\"events\":%" PRIu64
               "}}\n",
               folding.unmatched_exits, recursion_drops, event_drops);
}

int flame_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  const Instance *instance = instance_of(ctx);
  if (!support::has_instance(g_host, ctx, "flame", instance)) return 1;
  return support::guarded_report(g_host, ctx, "flame", out, [&] {
    Folding folding;
    folding.ctx = ctx;
    folding.instance = instance;
    folding.per_thread = g_host->option_bool(ctx, "per_thread") != 0;
    g_host->for_each_thread(ctx, fold_thread, &folding);
    if (const uint64_t unpooled =
            instance->unpooled_calls.load(std::memory_order_relaxed))
      folding.stacks["[too many threads]"].calls += unpooled;
    const std::string_view fmt = format != nullptr ? format : "folded";
    if (fmt == "folded") {
      // Nothing but stacks: flamegraph.pl and speedscope read every line.
      // By time, a stack weighs its own time, so that a frame's width (its
      // stack's and every longer one's) is its calls' whole time; stacks
      // of no time ([table full], [too many threads]) say so in json.
      for (const auto &[stack, w] : folding.stacks) {
        const uint64_t weight = instance->by_time ? w.self_ns : w.calls;
        if (instance->by_time && w.total_ns == 0) continue;
        std::fprintf(out, "%s %" PRIu64 "\n", stack.c_str(), weight);
      }
    } else if (fmt == "svg") {
      write_svg(out, folding.stacks, instance->by_time);
    } else if (fmt == "speedscope") {
      write_speedscope(out, folding.stacks, instance->by_time, g_host->process_name());
    } else if (fmt == "json") {
      uint64_t recursion_drops = 0, event_drops = 0;
      g_host->drop_counts(ctx, &recursion_drops, &event_drops);
      write_json(out, folding, recursion_drops, event_drops);
    } else {
      g_host->set_error(ctx, "flame: unknown format '%s'", format);
      return 1;
    }
    return 0;
  });
}

constexpr ftjit_plugin kDescriptor = support::no_fp_descriptor({
    .name = "flame",
    .description = "time (or calls) per call stack, as folded stacks for flame graphs",
    .options = kOptions,
    .n_options = std::size(kOptions),
    .formats = kFormats,
    .thread_storage_size = sizeof(ThreadSlot),
    .init = flame_init,
    .shutdown = flame_shutdown,
    .entry = on_entry,
    .exit = on_exit,
    .report = flame_report,
});

}  // namespace
}  // namespace ftjit_flame

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  return ftjit_plugin_support::accept_host(host, ftjit_flame::g_host,
                                           ftjit_flame::kDescriptor);
}
