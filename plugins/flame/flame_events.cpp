// SPDX-License-Identifier: MIT
// flame plugin, event path: each entry finds (or adds) the child of the
// thread's current stack node and counts it; each exit, returned or unwound,
// pops, and under weight=time adds the call's time, entry to exit, to its
// node (an unwound frame's ends at the unwind). Calls beyond max_depth are
// not timed: their time is their deepest kept ancestor's own. Built with
// -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "flame.h"

#include "event_support.h"

namespace ftjit_flame {

namespace support = ftjit_plugin_support;

const ftjit_host *g_host = nullptr;

Instance *instance_of(ftjit_plugin_ctx *ctx) {
  return static_cast<Instance *>(g_host->instance_data(ctx));
}

namespace {

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
  uint64_t index = support::home_index(*instance, key);
  for (;;) {
    Node &node = slot->entries[index];
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
  Node &node = slot->entries[index];
  node.ip = ip;
  node.parent = parent;
  node.calls = 1;
  return uint32_t(index + 1);
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  // A thread's first event claims a pooled table; a thread without one
  // counts its calls as unpooled.
  ThreadSlot *slot =
      support::claimed_slot<ThreadSlot>(g_host, ctx, support::Unpooled::kCount);
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
  // Last, so that the table's work is not counted in the call's time.
  if (slot->instance->by_time) slot->stack[depth].start_ns = g_host->now_ns();
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
  if (slot->instance->by_time) {
    // The frames whose exits went missing end here too, with this one.
    const uint64_t now = g_host->now_ns();
    for (uint32_t d = depth - 1; d < slot->depth; ++d) {
      const Frame &frame = slot->stack[d];
      if (frame.node == kLostNode || frame.node == 0) continue;
      slot->entries[frame.node - 1].total_ns += now - frame.start_ns;
    }
  }
  slot->depth = depth - 1;
}

}  // namespace ftjit_flame
