// SPDX-License-Identifier: MIT
// latency plugin, event path: push (ip, start) at entry, pop and add the
// duration to the function's log2 histogram at exit. Built with
// -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "latency.h"

namespace ftjit_latency {

const ftjit_host *g_host = nullptr;

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

namespace {

// Once per thread: its first event claims a pooled table.
__attribute__((noinline)) bool claim_table(ftjit_plugin_ctx *ctx,
                                           ThreadSlot *slot) {
  Instance *instance = instance_of(ctx);
  slot->state = SlotState::kRefused;
  if (instance == nullptr) return false;
  slot->instance = instance;
  uint32_t index =
      instance->tables_claimed.fetch_add(1, std::memory_order_relaxed);
  if (index >= instance->max_threads) return false;
  slot->histograms =
      instance->histograms + uint64_t(index) * instance->table_size;
  slot->header = instance->headers + index;
  slot->state = SlotState::kClaimed;
  return true;
}

ThreadSlot *claimed_slot(ftjit_plugin_ctx *ctx) {
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot == nullptr) return nullptr;  // the host ran out of memory
  if (slot->state == SlotState::kClaimed) return slot;
  if (slot->state == SlotState::kUnclaimed && claim_table(ctx, slot))
    return slot;
  return nullptr;
}

void record(ThreadSlot *slot, uint64_t ip, uint64_t duration_ns) {
  const Instance *instance = slot->instance;
  const uint64_t mask = instance->table_size - 1;
  uint64_t index =
      ((ip * 0x9E3779B97F4A7C15ull) >> instance->hash_shift) & mask;
  FunctionHistogram *histogram;
  for (;;) {
    histogram = &slot->histograms[index];
    if (histogram->ip == ip) break;
    if (histogram->ip == 0) {
      // The load limit keeps an empty slot in every probe sequence.
      if (slot->header->used >= instance->load_limit) {
        ++slot->header->overflow_calls;
        return;
      }
      ++slot->header->used;
      histogram->ip = ip;
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
              ftjit_plugin_regs *) {
  ThreadSlot *slot = claimed_slot(ctx);
  if (slot == nullptr || ip == 0) return;
  const uint32_t depth = slot->depth++;
  if (depth >= kMaxDepth) return;
  slot->stack[depth].ip = ip;
  // Read the clock last so that the plugin's own work is not timed.
  slot->stack[depth].start_ns = g_host->now_ns();
}

void on_exit(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret) {
  const uint64_t now = g_host->now_ns();
  ThreadSlot *slot = claimed_slot(ctx);
  if (slot == nullptr) {
    auto *refused = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
    if (refused != nullptr && refused->instance != nullptr)
      refused->instance->unpooled_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
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
  record(slot, ip, now - slot->stack[depth - 1].start_ns);
}

}  // namespace ftjit_latency
