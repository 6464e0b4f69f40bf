// SPDX-License-Identifier: MIT
// flame plugin: the per-instance state shared by its event path and its
// report.
#ifndef FTJIT_PLUGIN_FLAME_H
#define FTJIT_PLUGIN_FLAME_H

#include <ftjit/plugin.h>

#include <cstdint>

#include "table_pool.h"

namespace ftjit_flame {

//! One distinct call stack of one thread, as a node of its call tree: the
//! stack of its parent plus `ip`. Node ids are slot index + 1; 0 is the root
//! (the empty stack), so ip 0 marks an empty slot.
struct Node {
  uint64_t ip;
  uint64_t calls;
  uint32_t parent;
  uint32_t reserved;
  uint64_t total_ns;  // weight=time: the calls' time, entry to exit (or unwind)
};

//! A stack the table had no room for; its calls, and those of everything
//! called from it, are counted as lost.
constexpr uint32_t kLostNode = UINT32_MAX;
//! Not a function entry: the frame standing for calls beyond max_depth.
constexpr uint64_t kTruncatedIp = 1;
//! max_depth's ceiling, which sizes the per-thread stack.
constexpr uint32_t kMaxDepthLimit = 256;

struct TableHeader {
  uint64_t lost_calls;       // calls on stacks the table had no room for
  uint64_t unmatched_exits;  // exits without an entry on the plugin's stack
  uint32_t used;
  uint32_t reserved;
};

//! One loaded instance: a pool of per-thread tables of Nodes.
struct Instance : ftjit_plugin_support::TablePool<Node, TableHeader> {
  uint32_t max_depth = 0;  // frames per stack, <= kMaxDepthLimit
  bool by_time = true;     // weight=time (else weight=calls: no clock read)
};

//! What one folded stack weighs, summed over threads (the report's).
struct Weights {
  uint64_t calls = 0;
  uint64_t total_ns = 0;  // its calls' time, callees included
  uint64_t self_ns = 0;   // the same without the callees' (time spent in it)
};

struct Frame {
  uint64_t ip;
  uint32_t node;
  uint32_t reserved;
  uint64_t start_ns;  // weight=time: when the call entered
};

//! The host's per-thread storage block (zeroed by the host): the thread's
//! table of Nodes once claimed, and its open calls.
struct ThreadSlot : ftjit_plugin_support::PooledSlot<Instance> {
  uint32_t depth;  // may exceed max_depth; only max_depth frames are kept
  Frame stack[kMaxDepthLimit];
};

using ftjit_plugin_support::SlotState;

extern const ftjit_host *g_host;

//! The instance init gave the host, nullptr if init failed. [event]-safe.
//! Defined with the event path, so its one copy is built FP-free.
Instance *instance_of(ftjit_plugin_ctx *ctx);

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs);
void on_exit(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
             const ftjit_plugin_ret *ret);

}  // namespace ftjit_flame

#endif
