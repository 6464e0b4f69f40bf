// SPDX-License-Identifier: MIT
// Shared by the built-in plugins (SDK only, header-only): a pool of
// per-thread hash tables allocated in init, and the per-thread slot that
// claims one of them on the thread's first event. Types only: the event-path
// functions are in event_support.h, the lifecycle ones in plugin_support.h.
#ifndef FTJIT_PLUGINS_COMMON_TABLE_POOL_H
#define FTJIT_PLUGINS_COMMON_TABLE_POOL_H

#include <atomic>
#include <cstdint>

namespace ftjit_plugin_support {

//! One loaded instance's tables: `max_threads` tables of `table_size`
//! Entries (ip 0 marks an empty entry) and one Header each, the Header
//! counting at least `used` and `overflow` (what found the table full; the
//! plugin names it). A plugin's Instance derives from it.
template <class Entry, class Header>
struct TablePool {
  using EntryType = Entry;
  using HeaderType = Header;

  uint32_t table_size = 0;   // entries per thread, a power of two
  uint32_t hash_shift = 0;   // 64 - log2(table_size), at most 63
  uint32_t load_limit = 0;   // at most this many entries used per thread
  uint32_t max_threads = 0;  // tables in the pool
  std::atomic<uint32_t> tables_claimed{0};
  std::atomic<uint64_t> unpooled_calls{0};  // threads beyond max_threads
  Entry *entries = nullptr;                 // max_threads * table_size
  Header *headers = nullptr;                // max_threads
};

enum class SlotState : uint32_t { kUnclaimed = 0, kClaimed = 1, kRefused = 2 };

//! The start of a plugin's per-thread storage block (zeroed by the host):
//! the thread's table once claimed. A plugin's ThreadSlot derives from it.
template <class Instance>
struct PooledSlot {
  using InstanceType = Instance;

  typename Instance::EntryType *entries;
  typename Instance::HeaderType *header;
  Instance *instance;  // set by the claim, even when it is refused
  SlotState state;
};

}  // namespace ftjit_plugin_support

#endif
