// SPDX-License-Identifier: MIT
// trace plugin, event path: timestamp, depth, one ring slot per entry or
// exit. Built with -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "trace.h"

namespace ftjit_trace {

const ftjit_host *g_host = nullptr;

namespace {

void record(ftjit_plugin_ctx *ctx, uint64_t timestamp_ns, uint64_t ip,
            uint64_t parent_ip, uint32_t depth, EventKind kind) {
  auto *event = static_cast<TraceEvent *>(g_host->event_reserve(ctx));
  if (event == nullptr) return;  // buffer full: the host counts the drop
  event->timestamp_ns = timestamp_ns;
  event->ip = ip;
  event->parent_ip = parent_ip;
  event->depth = depth;
  event->kind = kind;
  g_host->event_commit(ctx);
}

}  // namespace

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  // The depth moves even when the event is dropped, so later events of the
  // thread still nest right.
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  const uint32_t depth = slot != nullptr ? slot->depth++ : 0;
  record(ctx, g_host->now_ns(), ip, parent_ip, depth, EventKind::kEntry);
}

void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret) {
  const uint64_t now = g_host->now_ns();
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  uint32_t depth = 0;
  if (slot != nullptr && slot->depth > 0) depth = --slot->depth;
  record(ctx, now, ip, parent_ip, depth,
         ret != nullptr ? EventKind::kExit : EventKind::kUnwound);
}

}  // namespace ftjit_trace
