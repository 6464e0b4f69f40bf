// SPDX-License-Identifier: MIT
// count plugin: the per-instance state shared by its event path and its report.
#ifndef FTJIT_PLUGIN_COUNT_H
#define FTJIT_PLUGIN_COUNT_H

#include <ftjit/plugin.h>

#include <cstdint>

#include "table_pool.h"

namespace ftjit_count {

//! One function's calls on one thread (with --by-arg: those with one value
//! of the argument, `key`; else key 0). ip 0 marks an empty slot.
struct Counter {
  uint64_t ip;
  uint64_t key;
  uint64_t calls;
};

//! Bookkeeping of one thread's table of Counters.
struct TableHeader {
  uint64_t overflow_calls;  // calls that found the table at its load limit
  uint32_t used;
  uint32_t reserved;
};

//! One loaded instance: a pool of per-thread tables of Counters, allocated in
//! init so that no thread allocates on its first event.
struct Instance : ftjit_plugin_support::TablePool<Counter, TableHeader> {
  bool keyed = false;  // --by-arg: the host gives each call's key
  //! What the session records (an older host: nullptr), for the report.
  const ftjit_record_info *record = nullptr;
};

//! The host's per-thread storage block (zeroed by the host): the thread's
//! table of Counters once claimed.
struct ThreadSlot : ftjit_plugin_support::PooledSlot<Instance> {};

using ftjit_plugin_support::SlotState;

//! Set once, by ftjit_plugin_v1.
extern const ftjit_host *g_host;

//! The instance init gave the host, nullptr if init failed. [event]-safe.
//! Defined with the event path, so its one copy is built FP-free.
Instance *instance_of(ftjit_plugin_ctx *ctx);

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs);

}  // namespace ftjit_count

#endif
