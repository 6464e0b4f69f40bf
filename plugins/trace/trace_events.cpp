// SPDX-License-Identifier: MIT
// trace plugin, event path: timestamp, depth, one ring slot per entry or
// exit. Built with -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "trace.h"

namespace ftjit_trace {

const ftjit_host *g_host = nullptr;

// Both callbacks take their ring slot first and fill what they know before
// calling the host again: fewer values live across the host's calls, each
// of which would be a register saved and restored. The depth moves even
// when the event is dropped (a full ring: the host counts the drop), so
// later events of the thread still nest right.

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  auto *event = static_cast<TraceEvent *>(g_host->event_reserve(ctx));
  if (event != nullptr) {
    event->ip = ip;
    event->parent_ip = parent_ip;
    event->kind = EventKind::kEntry;
  }
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  const uint32_t depth = slot != nullptr ? slot->depth++ : 0;
  if (event == nullptr) return;
  event->depth = depth;
  event->timestamp_ns = g_host->now_ns();
  g_host->event_commit(ctx);
}

void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret) {
  auto *event = static_cast<TraceEvent *>(g_host->event_reserve(ctx));
  if (event != nullptr) {
    event->ip = ip;
    event->parent_ip = parent_ip;
    event->kind = ret != nullptr ? EventKind::kExit : EventKind::kUnwound;
  }
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  uint32_t depth = 0;
  if (slot != nullptr && slot->depth > 0) depth = --slot->depth;
  if (event == nullptr) return;
  event->depth = depth;
  event->timestamp_ns = g_host->now_ns();
  g_host->event_commit(ctx);
}

}  // namespace ftjit_trace
