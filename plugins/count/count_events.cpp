// SPDX-License-Identifier: MIT
// count plugin, event path: a hash and an increment per call. Compiled with
// -mgeneral-regs-only, which lets the descriptor set FTJIT_PLUGIN_F_NO_FP.
#include "count.h"

namespace ftjit_count {

const ftjit_host *g_host = nullptr;

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

namespace {

// Taken once per thread: the first call of a thread claims a pooled table.
__attribute__((noinline)) bool claim_table(ftjit_plugin_ctx *ctx,
                                           ThreadSlot *slot) {
  Instance *instance = instance_of(ctx);
  if (instance == nullptr) {
    slot->state = SlotState::kRefused;
    return false;
  }
  slot->instance = instance;
  uint32_t index =
      instance->tables_claimed.fetch_add(1, std::memory_order_relaxed);
  if (index >= instance->max_threads) {
    slot->state = SlotState::kRefused;
    return false;
  }
  slot->counters = instance->counters + uint64_t(index) * instance->table_size;
  slot->header = instance->headers + index;
  slot->state = SlotState::kClaimed;
  return true;
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot == nullptr) return;  // the host ran out of memory for this thread
  if (slot->state != SlotState::kClaimed) {
    if (slot->state == SlotState::kRefused || !claim_table(ctx, slot)) {
      if (slot->instance != nullptr)
        slot->instance->unpooled_calls.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  const Instance *instance = slot->instance;
  // Fibonacci hashing: entry addresses are aligned, the multiply spreads them.
  const uint64_t mask = instance->table_size - 1;
  uint64_t index = ((ip * 0x9E3779B97F4A7C15ull) >> instance->hash_shift) & mask;
  for (;;) {
    Counter &counter = slot->counters[index];
    if (counter.ip == ip) {
      ++counter.calls;
      return;
    }
    if (counter.ip == 0) break;
    index = (index + 1) & mask;
  }
  // The load limit keeps an empty slot in every probe sequence.
  TableHeader *header = slot->header;
  if (header->used >= instance->load_limit || ip == 0) {
    ++header->overflow_calls;
    return;
  }
  ++header->used;
  slot->counters[index].ip = ip;
  slot->counters[index].calls = 1;
}

}  // namespace ftjit_count
