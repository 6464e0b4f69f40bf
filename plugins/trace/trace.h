// SPDX-License-Identifier: MIT
// trace plugin: the buffered event and the per-instance state shared by the
// event path, the writer thread and the report.
#ifndef FTJIT_PLUGIN_TRACE_H
#define FTJIT_PLUGIN_TRACE_H

#include <ftjit/plugin.h>

#include <cstdint>

namespace ftjit_trace {

enum class EventKind : uint8_t { kEntry = 1, kExit = 2, kUnwound = 3 };

//! One buffered event: what a traced thread records, nothing it can look up
//! later (thread id and name come with consume's ftjit_thread_info). When
//! the session captures arguments (--args, --retval), the host's record of
//! them follows in the same slot (args_room bytes), if `has_record`.
struct TraceEvent {
  uint64_t timestamp_ns;
  uint64_t ip;
  uint64_t parent_ip;
  uint32_t depth;  // frames of this thread open below this one
  EventKind kind;
  uint8_t has_record;
  uint8_t reserved[2];
};
static_assert(sizeof(TraceEvent) == 32, "events are packed in the ring");
static_assert(alignof(TraceEvent) <= 8,
              "event_reserve promises 8-byte alignment, no more");

//! Calls whose --when conditions failed are not recorded, nor their exits:
//! one bit per open frame says which (frames past the bits are recorded).
constexpr uint32_t kFilterBits = 4096;

//! The host's hint for the return of each open frame, from its entry's
//! capture (args_capture_hint): one lookup per call instead of two. Frames
//! past these get none, and their returns are looked up.
constexpr uint32_t kHintFrames = 256;

//! The host's per-thread storage block.
struct ThreadSlot {
  uint32_t depth;   // recorded frames open
  uint32_t frames;  // every frame whose exit will come (recorded or not)
  uint32_t args_room;  // the host's record room + 1; 0: not asked yet
  uint32_t hinted;     // the host has the *_capture_hint services
  const ftjit_args_fast_table *fast;  // the common captures; NULL: ask the host
  uint64_t filtered[kFilterBits / 64];
  uint64_t exit_hint[kHintFrames];  // 0: none (a lookup at the return)
};

//! Set once, by ftjit_plugin_v1.
extern const ftjit_host *g_host;

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs);
void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret);

}  // namespace ftjit_trace

#endif
