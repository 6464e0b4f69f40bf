// SPDX-License-Identifier: MIT
// latency plugin, event path: push (ip, start) at entry, pop and add the
// duration to the function's log2 histogram at exit. Built with
// -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "latency.h"

#include "event_support.h"

namespace ftjit_latency {

namespace support = ftjit_plugin_support;

const ftjit_host *g_host = nullptr;

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

namespace {

void record(ThreadSlot *slot, uint64_t ip, uint64_t key, uint64_t duration_ns) {
  const Instance *instance = slot->instance;
  const uint64_t mask = instance->table_size - 1;
  uint64_t index = support::home_index(*instance, ip, key);
  FunctionHistogram *histogram;
  for (;;) {
    histogram = &slot->entries[index];
    if (histogram->ip == ip && histogram->key == key) break;
    if (histogram->ip == 0) {
      // The load limit keeps an empty slot in every probe sequence.
      if (slot->header->used >= instance->load_limit) {
        ++slot->header->overflow_calls;
        return;
      }
      ++slot->header->used;
      histogram->ip = ip;
      histogram->key = key;
      break;
    }
    index = (index + 1) & mask;
  }
  ++histogram->calls;
  histogram->total_ns += duration_ns;
  if (duration_ns > histogram->max_ns) histogram->max_ns = duration_ns;
  ++histogram->buckets[bucket_of(duration_ns)];
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs) {
  // A thread's first event claims a pooled table.
  ThreadSlot *slot =
      support::claimed_slot<ThreadSlot>(g_host, ctx, support::Unpooled::kIgnore);
  if (slot == nullptr || ip == 0) return;
  const uint32_t depth = slot->depth++;
  if (depth >= kMaxDepth) return;
  slot->stack[depth].ip = ip;
  // --by-arg: the argument's value at entry, kept for the exit.
  uint64_t key = 0;
  if (slot->instance->keyed) g_host->arg_key(ctx, ip, regs, &key);
  slot->stack[depth].key = key;
  // Read the clock last so that the plugin's own work is not timed.
  slot->stack[depth].start_ns = g_host->now_ns();
}

void on_exit(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret) {
  const uint64_t now = g_host->now_ns();
  // Calls of a thread without a table are counted here, once each.
  ThreadSlot *slot =
      support::claimed_slot<ThreadSlot>(g_host, ctx, support::Unpooled::kCount);
  if (slot == nullptr) return;
  TableHeader *header = slot->header;
  if (slot->depth > kMaxDepth) {
    --slot->depth;
    ++header->too_deep;
    return;
  }
  // The host promises one exit per entry, innermost first; should one go
  // missing, the frames above the matching one are dropped with it.
  uint32_t depth = slot->depth;
  while (depth > 0 && slot->stack[depth - 1].ip != ip) --depth;
  if (depth == 0) {
    ++header->unmatched_exits;
    return;
  }
  slot->depth = depth - 1;
  if (ret == nullptr) {
    ++header->unwound;
    return;
  }
  record(slot, ip, slot->stack[depth - 1].key, now - slot->stack[depth - 1].start_ns);
}

}  // namespace ftjit_latency
