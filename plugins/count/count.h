// SPDX-License-Identifier: MIT
// count plugin: the per-instance state shared by its event path and its report.
#ifndef FTJIT_PLUGIN_COUNT_H
#define FTJIT_PLUGIN_COUNT_H

#include <ftjit/plugin.h>

#include <atomic>
#include <cstdint>

namespace ftjit_count {

//! One function's calls on one thread. ip 0 marks an empty slot.
struct Counter {
  uint64_t ip;
  uint64_t calls;
};

//! Bookkeeping of one thread's table of Counters.
struct TableHeader {
  uint64_t overflow_calls;  // calls that found the table at its load limit
  uint32_t used;
  uint32_t reserved;
};

//! One loaded instance: its options and a pool of per-thread tables,
//! allocated in init so that no thread allocates on its first event.
struct Instance {
  uint32_t table_size = 0;   // slots per thread, a power of two
  uint32_t hash_shift = 0;   // 64 - log2(table_size)
  uint32_t load_limit = 0;   // at most this many slots used per thread
  uint32_t max_threads = 0;  // tables in the pool
  std::atomic<uint32_t> tables_claimed{0};
  std::atomic<uint64_t> unpooled_calls{0};  // threads beyond max_threads
  Counter *counters = nullptr;               // max_threads * table_size
  TableHeader *headers = nullptr;            // max_threads
};

enum class SlotState : uint32_t { kUnclaimed = 0, kClaimed = 1, kRefused = 2 };

//! The host's per-thread storage block (zeroed by the host).
struct ThreadSlot {
  Counter *counters;
  TableHeader *header;
  Instance *instance;
  SlotState state;
};

//! Set once, by ftjit_plugin_v1.
extern const ftjit_host *g_host;

//! The instance init gave the host, nullptr if init failed. [event]-safe.
//! Defined with the event path, so its one copy is built FP-free.
Instance *instance_of(ftjit_plugin_ctx *ctx);

void on_entry(uint64_t ip, uint64_t parent_ip, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *regs);

}  // namespace ftjit_count

#endif
