// SPDX-License-Identifier: MIT
// flame plugin: calls per distinct call stack, as folded stacks
// (`outer;inner;leaf COUNT`) for flamegraph.pl, speedscope or Perfetto.
// A count is a number of function entries, not of time samples.
#include "flame.h"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ftjit_flame {
namespace {

constexpr int64_t kMaxTableSize = int64_t(1) << 24;
constexpr int64_t kMaxThreads = 65536;

const ftjit_plugin_option kOptions[] = {
    {"table_size", FTJIT_OPTION_INT, "16384",
     "distinct stacks per thread (power of two; 3/4 usable)"},
    {"max_threads", FTJIT_OPTION_INT, "256",
     "threads with their own table; later threads are not counted"},
    {"max_depth", FTJIT_OPTION_INT, "64",
     "frames kept per stack (at most 256); deeper calls count as [truncated]"},
    {"per_thread", FTJIT_OPTION_BOOL, "false",
     "start each stack with a `name-tid` frame for its thread"},
};
const char *const kFormats[] = {"folded", "json", nullptr};
constexpr size_t kHostSizeNeeded =
    offsetof(ftjit_host, process_name) + sizeof(ftjit_host::process_name);

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

void free_instance(Instance *instance) {
  std::free(instance->nodes);
  std::free(instance->headers);
  delete instance;
}

int flame_init(ftjit_plugin_ctx *ctx) {
  // Older hosts lack instance_data, and the event path has no other way to
  // find its instance.
  if (g_host->struct_size < kHostSizeNeeded) {
    g_host->set_error(ctx,
                      "flame: the host is too old (ftjit_host of %u bytes, "
                      "need %zu: no instance data)",
                      g_host->struct_size, kHostSizeNeeded);
    return 1;
  }
  const int64_t table_size = g_host->option_int(ctx, "table_size");
  const int64_t max_threads = g_host->option_int(ctx, "max_threads");
  const int64_t max_depth = g_host->option_int(ctx, "max_depth");
  if (!is_power_of_two(table_size) || table_size > kMaxTableSize) {
    g_host->set_error(ctx,
                      "flame: table_size must be a power of two in [1, %" PRId64
                      "], got %" PRId64,
                      kMaxTableSize, table_size);
    return 1;
  }
  if (max_threads < 1 || max_threads > kMaxThreads) {
    g_host->set_error(ctx,
                      "flame: max_threads must be in [1, %" PRId64 "], got %" PRId64,
                      kMaxThreads, max_threads);
    return 1;
  }
  if (max_depth < 1 || max_depth > int64_t(kMaxDepthLimit)) {
    g_host->set_error(ctx, "flame: max_depth must be in [1, %u], got %" PRId64,
                      kMaxDepthLimit, max_depth);
    return 1;
  }
  auto *instance = new (std::nothrow) Instance;
  if (instance == nullptr) {
    g_host->set_error(ctx, "flame: out of memory");
    return 1;
  }
  instance->table_size = uint32_t(table_size);
  instance->hash_shift =
      std::min(63u, 64 - uint32_t(__builtin_ctzll(uint64_t(table_size))));
  instance->load_limit =
      uint32_t(table_size - std::max<int64_t>(1, table_size / 4));
  instance->max_threads = uint32_t(max_threads);
  instance->max_depth = uint32_t(max_depth);
  // calloc: tables no thread claims stay unbacked zero pages.
  instance->nodes = static_cast<Node *>(
      std::calloc(size_t(max_threads) * size_t(table_size), sizeof(Node)));
  instance->headers = static_cast<TableHeader *>(
      std::calloc(size_t(max_threads), sizeof(TableHeader)));
  if (instance->nodes == nullptr || instance->headers == nullptr) {
    g_host->set_error(ctx, "flame: cannot allocate %" PRId64
                      " tables of %" PRId64 " stacks",
                      max_threads, table_size);
    free_instance(instance);
    return 1;
  }
  g_host->set_instance_data(ctx, instance);
  return 0;
}

void flame_shutdown(ftjit_plugin_ctx *ctx) {
  Instance *instance = instance_of(ctx);
  if (instance == nullptr) return;
  g_host->set_instance_data(ctx, nullptr);
  free_instance(instance);
}

// ---------------------------------------------------------------------------
// Report: every thread's call tree, folded into stacks of names
// ---------------------------------------------------------------------------

struct Folding {
  ftjit_plugin_ctx *ctx = nullptr;
  const Instance *instance = nullptr;
  bool per_thread = false;
  std::unordered_map<uint64_t, std::string> names;  // ip -> frame text
  std::map<std::string, uint64_t> stacks;           // folded stack -> calls
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
  if (ip == kTruncatedIp) {
    it->second = "[truncated]";
  } else if (const char *name = g_host->symbol(folding.ctx, ip);
             name != nullptr && *name) {
    it->second = frame_text(name);
  } else {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%" PRIx64, ip);
    it->second = hex;
  }
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
  std::vector<uint64_t> path;
  for (uint32_t i = 0; i < folding->instance->table_size; ++i) {
    const Node &node = slot->nodes[i];
    if (node.ip == 0 || node.calls == 0) continue;
    path.clear();
    for (uint32_t id = i + 1; id != 0; id = slot->nodes[id - 1].parent)
      path.push_back(slot->nodes[id - 1].ip);
    std::string stack = prefix;
    for (auto ip = path.rbegin(); ip != path.rend(); ++ip) {
      if (ip != path.rbegin()) stack += ';';
      stack += frame_name(*folding, *ip);
    }
    folding->stacks[stack] += node.calls;
  }
  if (slot->header->lost_calls != 0)
    folding->stacks[prefix + "[table full]"] += slot->header->lost_calls;
  folding->unmatched_exits += slot->header->unmatched_exits;
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

void write_json(FILE *out, const Folding &folding, uint64_t recursion_drops,
                uint64_t event_drops) {
  std::fputs("{\"unit\":\"calls\",\"stacks\":[", out);
  bool first = true;
  for (const auto &[stack, calls] : folding.stacks) {
    std::fputs(first ? "\n{\"frames\":[" : ",\n{\"frames\":[", out);
    first = false;
    size_t begin = 0;
    for (;;) {
      const size_t end = stack.find(';', begin);
      write_json_string(out, std::string_view(stack).substr(
                                 begin, end == std::string::npos ? end : end - begin));
      if (end == std::string::npos) break;
      std::fputc(',', out);
      begin = end + 1;
    }
    std::fprintf(out, "],\"calls\":%" PRIu64 "}", calls);
  }
  std::fprintf(out,
               "],\n\"exits_without_entry\":%" PRIu64
               ",\"dropped\":{\"recursion\":%" PRIu64 ",\"events\":%" PRIu64
               "}}\n",
               folding.unmatched_exits, recursion_drops, event_drops);
}

int flame_report(ftjit_plugin_ctx *ctx, FILE *out, const char *format) {
  const Instance *instance = instance_of(ctx);
  if (instance == nullptr) {
    g_host->set_error(ctx, "flame: report without a successful init");
    return 1;
  }
  try {
    Folding folding;
    folding.ctx = ctx;
    folding.instance = instance;
    folding.per_thread = g_host->option_bool(ctx, "per_thread") != 0;
    g_host->for_each_thread(ctx, fold_thread, &folding);
    if (const uint64_t unpooled =
            instance->unpooled_calls.load(std::memory_order_relaxed))
      folding.stacks["[too many threads]"] += unpooled;
    const std::string_view fmt = format != nullptr ? format : "folded";
    if (fmt == "folded") {
      // Nothing but stacks: flamegraph.pl and speedscope read every line.
      for (const auto &[stack, calls] : folding.stacks)
        std::fprintf(out, "%s %" PRIu64 "\n", stack.c_str(), calls);
    } else if (fmt == "json") {
      uint64_t recursion_drops = 0, event_drops = 0;
      g_host->drop_counts(ctx, &recursion_drops, &event_drops);
      write_json(out, folding, recursion_drops, event_drops);
    } else {
      g_host->set_error(ctx, "flame: unknown format '%s'", format);
      return 1;
    }
  } catch (const std::bad_alloc &) {
    g_host->set_error(ctx, "flame: out of memory while reporting");
    return 1;
  }
  return std::ferror(out) ? (g_host->set_error(ctx, "flame: write failed"), 1)
                          : 0;
}

const ftjit_plugin kDescriptor = {
    sizeof(ftjit_plugin),
    FTJIT_PLUGIN_ABI_VERSION,
    "flame",
    "calls per call stack, as folded stacks for flame graphs",
    kOptions,
    sizeof kOptions / sizeof kOptions[0],
    FTJIT_PLUGIN_F_NO_FP,
    kFormats,
    sizeof(ThreadSlot),
    0,
    0,
    0,
    flame_init,
    flame_shutdown,
    on_entry,
    on_exit,
    nullptr,
    flame_report,
};

}  // namespace
}  // namespace ftjit_flame

extern "C" FTJIT_PLUGIN_EXPORT const ftjit_plugin *ftjit_plugin_v1(
    const ftjit_host *host) {
  if (host == nullptr || host->abi_version != FTJIT_PLUGIN_ABI_VERSION)
    return nullptr;
  ftjit_flame::g_host = host;
  return &ftjit_flame::kDescriptor;
}
