// SPDX-License-Identifier: MIT
// count plugin, event path: a hash and an increment per call. Compiled with
// -mgeneral-regs-only, which lets the descriptor set FTJIT_PLUGIN_F_NO_FP.
#include "count.h"

#include "event_support.h"

namespace ftjit_count {

namespace support = ftjit_plugin_support;

const ftjit_host *g_host = nullptr;

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

namespace {

void count_in(ThreadSlot *slot, uint64_t ip, uint64_t key) {
  const Instance *instance = slot->instance;
  const uint64_t mask = instance->table_size - 1;
  uint64_t index = support::home_index(*instance, ip, key);
  for (;;) {
    Counter &counter = slot->entries[index];
    if (counter.ip == ip && counter.key == key) {
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
  slot->entries[index].ip = ip;
  slot->entries[index].key = key;
  slot->entries[index].calls = 1;
}

// A thread's first call claims a pooled table; a thread without one counts
// its calls as unpooled. Out of line: the common path keeps only ip across
// the host's call.
__attribute__((noinline, cold)) void count_unclaimed(uint64_t ip, ftjit_plugin_ctx *ctx,
                                                     const ftjit_plugin_regs *regs) {
  ThreadSlot *slot =
      support::claimed_slot<ThreadSlot>(g_host, ctx, support::Unpooled::kCount);
  if (slot == nullptr) return;
  uint64_t key = 0;
  if (slot->instance->keyed) g_host->arg_key(ctx, ip, regs, &key);
  count_in(slot, ip, key);
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs) {
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot != nullptr && slot->state == SlotState::kClaimed) [[likely]] {
    uint64_t key = 0;
    // --by-arg: the value of the argument at this entry (a register or a
    // stack slot; a string's bytes hashed).
    if (slot->instance->keyed) [[unlikely]] g_host->arg_key(ctx, ip, regs, &key);
    count_in(slot, ip, key);
    return;
  }
  count_unclaimed(ip, ctx, regs);
}

}  // namespace ftjit_count
