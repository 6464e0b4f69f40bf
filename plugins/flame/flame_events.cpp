// SPDX-License-Identifier: MIT
// flame plugin, event path: each entry finds (or adds) the child of the
// thread's current stack node and counts it; each exit, returned or unwound,
// pops. Built with -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "flame.h"

namespace ftjit_flame {

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
  slot->nodes = instance->nodes + uint64_t(index) * instance->table_size;
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
  if (slot->instance != nullptr)
    slot->instance->unpooled_calls.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

// The node for stack `parent` + `ip`, counted once more; kLostNode when the
// table is at its load limit.
uint32_t count_child(ThreadSlot *slot, uint32_t parent, uint64_t ip) {
  if (parent == kLostNode) {
    ++slot->header->lost_calls;
    return kLostNode;
  }
  const Instance *instance = slot->instance;
  const uint64_t mask = instance->table_size - 1;
  const uint64_t key = ip ^ (uint64_t(parent) * 0xFF51AFD7ED558CCDull);
  uint64_t index =
      ((key * 0x9E3779B97F4A7C15ull) >> instance->hash_shift) & mask;
  for (;;) {
    Node &node = slot->nodes[index];
    if (node.ip == ip && node.parent == parent) {
      ++node.calls;
      return uint32_t(index + 1);
    }
    if (node.ip == 0) break;
    index = (index + 1) & mask;
  }
  // The load limit keeps an empty slot in every probe sequence.
  if (slot->header->used >= instance->load_limit) {
    ++slot->header->lost_calls;
    return kLostNode;
  }
  ++slot->header->used;
  Node &node = slot->nodes[index];
  node.ip = ip;
  node.parent = parent;
  node.calls = 1;
  return uint32_t(index + 1);
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  ThreadSlot *slot = claimed_slot(ctx);
  if (slot == nullptr || ip == 0) return;
  const uint32_t max_depth = slot->instance->max_depth;
  const uint32_t depth = slot->depth++;
  const uint32_t kept = depth < max_depth ? depth : max_depth;
  const uint32_t parent = kept == 0 ? 0 : slot->stack[kept - 1].node;
  if (depth >= max_depth) {
    // Beyond max_depth every call is counted under one marker frame.
    count_child(slot, parent, kTruncatedIp);
    return;
  }
  slot->stack[depth].ip = ip;
  slot->stack[depth].node = count_child(slot, parent, ip);
}

void on_exit(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *) {
  // Unwound frames (ret == NULL) are gone just the same: they pop too.
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot == nullptr || slot->state != SlotState::kClaimed) return;
  if (slot->depth > slot->instance->max_depth) {
    --slot->depth;
    return;
  }
  // The host promises one exit per entry, innermost first; should one go
  // missing, the frames above the matching one are dropped with it.
  uint32_t depth = slot->depth;
  while (depth > 0 && slot->stack[depth - 1].ip != ip) --depth;
  if (depth == 0) {
    ++slot->header->unmatched_exits;
    return;
  }
  slot->depth = depth - 1;
}

}  // namespace ftjit_flame
