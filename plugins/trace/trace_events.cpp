// SPDX-License-Identifier: MIT
// trace plugin, event path: timestamp, depth, one ring slot per entry or
// exit. Built with -mgeneral-regs-only for FTJIT_PLUGIN_F_NO_FP.
#include "trace.h"

#include <cstddef>

namespace ftjit_trace {

const ftjit_host *g_host = nullptr;

// Both callbacks take their ring slot first and fill what they know before
// calling the host again: fewer values live across the host's calls, each
// of which would be a register saved and restored. The depth moves even
// when the event is dropped (a full ring: the host counts the drop), so
// later events of the thread still nest right.

namespace {

// The host's record room in this instance's events: asked once per thread
// (args_room is not an [event] service's price to pay per call).
inline uint32_t args_room(ThreadSlot *slot, ftjit_plugin_ctx *ctx) {
  if (slot->args_room == 0) {
    const bool has = g_host->struct_size > offsetof(ftjit_host, args_room);
    slot->args_room = 1 + (has ? g_host->args_room(ctx) : 0);
    slot->hinted = g_host->struct_size > offsetof(ftjit_host, retval_capture_hint);
    const bool fast = slot->hinted != 0 && g_host->struct_size > offsetof(ftjit_host, args_fast_table);
    slot->fast = fast ? g_host->args_fast_table(ctx) : nullptr;
  }
  return slot->args_room - 1;
}

// The record of an entry. The common case (integer registers, whole
// words) comes from the host's table without a call (slot->fast, set at
// the thread's first args_room), the rest from the host. *hint: what the
// return hands back, kept with the frame; NULL: none kept.
inline uint32_t capture_entry(const ThreadSlot *slot, ftjit_plugin_ctx *ctx, uint64_t ip,
                              const ftjit_plugin_regs *regs, void *out, uint64_t *hint) {
  if (hint == nullptr) return g_host->args_capture(ctx, ip, regs, out);
  if (slot->fast != nullptr) {
    *hint = ftjit_args_fast_find(slot->fast, ip);
    if (*hint == FTJIT_ARGS_HINT_NONE) return 0;
    const uint32_t n = ftjit_args_fast_entry(slot->fast, *hint, regs, out);
    if (n != FTJIT_ARGS_ASK_HOST) return n;
  }
  if (slot->hinted == 0) return g_host->args_capture(ctx, ip, regs, out);
  return g_host->args_capture_hint(ctx, ip, regs, out, hint);
}

// The record of a return, given what its entry kept (0: nothing).
inline uint32_t capture_exit(const ThreadSlot *slot, ftjit_plugin_ctx *ctx, uint64_t ip, uint32_t frame,
                             const ftjit_plugin_ret *ret, void *out) {
  const uint64_t hint = frame < kHintFrames ? slot->exit_hint[frame] : 0;
  if (slot->fast != nullptr) {
    const uint32_t n = ftjit_args_fast_exit(slot->fast, hint, ip, ret, out);
    if (n != FTJIT_ARGS_ASK_HOST) return n;
  }
  if (slot->hinted == 0) return g_host->retval_capture(ctx, ip, ret, out);
  return g_host->retval_capture_hint(ctx, ip, hint, ret, out);
}

}  // namespace

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs) {
  auto *event = static_cast<TraceEvent *>(g_host->event_reserve(ctx));
  if (event != nullptr) {
    event->ip = ip;
    event->parent_ip = parent_ip;
    event->kind = EventKind::kEntry;
    event->has_record = 0;
  }
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot == nullptr) {
    if (event == nullptr) return;
    event->depth = 0;
    event->timestamp_ns = g_host->now_ns();
    g_host->event_commit(ctx);
    return;
  }
  const uint32_t frame = slot->frames++;
  if (frame < kFilterBits) slot->filtered[frame / 64] &= ~(uint64_t(1) << (frame % 64));
  // slot->fast first: set, it says args_room is too (and saves asking).
  if (event != nullptr && (slot->fast != nullptr || args_room(slot, ctx) != 0)) {
    uint64_t *hint = frame < kHintFrames && (slot->fast != nullptr || slot->hinted != 0) ? &slot->exit_hint[frame]
                                                                                        : nullptr;
    const uint32_t n = capture_entry(slot, ctx, ip, regs, event + 1, hint);
    if (n == FTJIT_ARGS_FILTERED && frame < kFilterBits) {
      // Not committed: the next reserve takes the same slot.
      slot->filtered[frame / 64] |= uint64_t(1) << (frame % 64);
      return;
    }
    event->has_record = n != 0 && n != FTJIT_ARGS_FILTERED;
  } else if (slot->args_room > 1 && frame < kHintFrames) {
    slot->exit_hint[frame] = 0;  // an older frame's would be wrong here
  }
  const uint32_t depth = slot->depth++;
  if (event == nullptr) return;
  event->depth = depth;
  event->timestamp_ns = g_host->now_ns();
  g_host->event_commit(ctx);
}

void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret) {
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  uint32_t frame = kHintFrames;  // none known
  if (slot != nullptr && slot->frames > 0) {
    frame = --slot->frames;
    if (frame < kFilterBits && (slot->filtered[frame / 64] >> (frame % 64) & 1) != 0) return;
  }
  auto *event = static_cast<TraceEvent *>(g_host->event_reserve(ctx));
  if (event != nullptr) {
    event->ip = ip;
    event->parent_ip = parent_ip;
    event->kind = ret != nullptr ? EventKind::kExit : EventKind::kUnwound;
    event->has_record = 0;
  }
  uint32_t depth = 0;
  if (slot != nullptr && slot->depth > 0) depth = --slot->depth;
  if (event == nullptr) return;
  if (ret != nullptr && slot != nullptr && (slot->fast != nullptr || args_room(slot, ctx) != 0)) {
    const uint32_t n = capture_exit(slot, ctx, ip, frame, ret, event + 1);
    event->has_record = n != 0;
  }
  event->depth = depth;
  event->timestamp_ns = g_host->now_ns();
  g_host->event_commit(ctx);
}

}  // namespace ftjit_trace
