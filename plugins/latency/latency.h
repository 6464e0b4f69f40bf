// SPDX-License-Identifier: MIT
// latency plugin: the per-instance state shared by its event path and its
// report.
#ifndef FTJIT_PLUGIN_LATENCY_H
#define FTJIT_PLUGIN_LATENCY_H

#include <ftjit/plugin.h>

#include <cstdint>

#include "table_pool.h"

namespace ftjit_latency {

//! Log2 buckets: [0], [1], [2, 4), ... [2^63, 2^64).
constexpr int kBuckets = 65;
inline int bucket_of(uint64_t ns) { return ns == 0 ? 0 : 64 - __builtin_clzll(ns); }

//! One function's durations on one thread. ip 0 marks an empty slot.
struct FunctionHistogram {
  uint64_t ip;
  uint64_t key;  // --by-arg: the argument's value at entry; else 0
  uint64_t calls;
  uint64_t total_ns;
  uint64_t max_ns;
  uint64_t buckets[kBuckets];
};

//! What one thread could not time, besides its histograms.
struct TableHeader {
  uint64_t overflow_calls;   // returns of functions that found the table full
  uint64_t unwound;          // frames left by exception or longjmp: not timed
  uint64_t unmatched_exits;  // exits without an entry on the plugin's stack
  uint64_t too_deep;         // returns from beyond kMaxDepth: not timed
  uint32_t used;
  uint32_t reserved;
};

//! Open calls kept per thread; deeper ones are counted, not timed.
constexpr uint32_t kMaxDepth = 128;

struct Frame {
  uint64_t ip;
  uint64_t key;
  uint64_t start_ns;
};

//! One loaded instance: a pool of per-thread tables of FunctionHistograms.
struct Instance : ftjit_plugin_support::TablePool<FunctionHistogram, TableHeader> {
  bool keyed = false;  // --by-arg: the host gives each call's key
};

//! The host's per-thread storage block (zeroed by the host): the thread's
//! table once claimed, and its open calls.
struct ThreadSlot : ftjit_plugin_support::PooledSlot<Instance> {
  uint32_t depth;  // may exceed kMaxDepth; only the first kMaxDepth are kept
  Frame stack[kMaxDepth];
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

}  // namespace ftjit_latency

#endif
