// SPDX-License-Identifier: MIT
// flame plugin: the per-instance state shared by its event path and its
// report.
#ifndef FTJIT_PLUGIN_FLAME_H
#define FTJIT_PLUGIN_FLAME_H

#include <ftjit/plugin.h>

#include <atomic>
#include <cstdint>

namespace ftjit_flame {

//! One distinct call stack of one thread, as a node of its call tree: the
//! stack of its parent plus `ip`. Node ids are slot index + 1; 0 is the root
//! (the empty stack), so ip 0 marks an empty slot.
struct Node {
  uint64_t ip;
  uint64_t calls;
  uint32_t parent;
  uint32_t reserved;
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

struct Instance {
  uint32_t table_size = 0;  // a power of two
  uint32_t hash_shift = 0;
  uint32_t load_limit = 0;
  uint32_t max_threads = 0;
  uint32_t max_depth = 0;   // frames per stack, <= kMaxDepthLimit
  std::atomic<uint32_t> tables_claimed{0};
  std::atomic<uint64_t> unpooled_calls{0};  // threads beyond max_threads
  Node *nodes = nullptr;                    // max_threads * table_size
  TableHeader *headers = nullptr;           // max_threads
};

enum class SlotState : uint32_t { kUnclaimed = 0, kClaimed = 1, kRefused = 2 };

struct Frame {
  uint64_t ip;
  uint32_t node;
  uint32_t reserved;
};

//! The host's per-thread storage block (zeroed by the host).
struct ThreadSlot {
  Node *nodes;
  TableHeader *header;
  Instance *instance;
  SlotState state;
  uint32_t depth;  // may exceed max_depth; only max_depth frames are kept
  Frame stack[kMaxDepthLimit];
};

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
