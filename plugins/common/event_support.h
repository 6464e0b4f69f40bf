// SPDX-License-Identifier: MIT
// Shared by the built-in plugins' event paths (SDK only, header-only):
// claiming a pooled table on a thread's first event, and the table's hash.
// Include it from the *_events.cpp file only, which is compiled with
// -mgeneral-regs-only: these inline functions and templates must have no
// copy built with FP/vector registers for the linker to pick instead.
#ifndef FTJIT_PLUGINS_COMMON_EVENT_SUPPORT_H
#define FTJIT_PLUGINS_COMMON_EVENT_SUPPORT_H

// The vector units' feature macros, which -mgeneral-regs-only takes away
// (x86-64: SSE; arm64: NEON).
#if defined(__SSE__) || defined(__ARM_NEON)
#error "event_support.h is for the event path: compile with -mgeneral-regs-only"
#endif

#include <ftjit/plugin.h>

#include <atomic>
#include <cstdint>

#include "table_pool.h"

namespace ftjit_plugin_support {

//! Taken once per thread: its first event claims a pooled table. Whatever
//! the outcome, the slot is no longer kUnclaimed afterwards.
template <class Slot>
__attribute__((noinline)) bool claim_table(const ftjit_host *host,
                                           ftjit_plugin_ctx *ctx, Slot *slot) {
  using Instance = typename Slot::InstanceType;
  auto *instance = static_cast<Instance *>(host->instance_data(ctx));
  slot->state = SlotState::kRefused;
  if (instance == nullptr) return false;
  slot->instance = instance;
  const uint32_t index =
      instance->tables_claimed.fetch_add(1, std::memory_order_relaxed);
  if (index >= instance->max_threads) return false;
  slot->entries = instance->entries + uint64_t(index) * instance->table_size;
  slot->header = instance->headers + index;
  slot->state = SlotState::kClaimed;
  return true;
}

//! Whether an event of a thread without a table counts as unpooled.
enum class Unpooled { kIgnore, kCount };

//! The calling thread's slot once it holds a table, claimed on its first
//! event; nullptr if it has none (host out of memory, init failed, or the
//! pool was exhausted: then the call is counted in unpooled_calls if asked).
template <class Slot>
inline Slot *claimed_slot(const ftjit_host *host, ftjit_plugin_ctx *ctx,
                          Unpooled unpooled) {
  auto *slot = static_cast<Slot *>(host->thread_storage(ctx));
  if (slot == nullptr) return nullptr;  // the host ran out of memory
  if (slot->state == SlotState::kClaimed) return slot;
  if (slot->state == SlotState::kUnclaimed && claim_table(host, ctx, slot))
    return slot;
  if (unpooled == Unpooled::kCount && slot->instance != nullptr)
    slot->instance->unpooled_calls.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

//! Where `key` starts probing in a table of the pool. Fibonacci hashing:
//! entry addresses are aligned, the multiply spreads them.
template <class Pool>
inline uint64_t home_index(const Pool &pool, uint64_t key) {
  return ((key * 0x9E3779B97F4A7C15ull) >> pool.hash_shift) &
         (pool.table_size - 1);
}

//! Where (ip, key) starts probing: key 0 (no --by-arg) probes where ip
//! alone does.
template <class Pool>
inline uint64_t home_index(const Pool &pool, uint64_t ip, uint64_t key) {
  return home_index(pool, ip + key * 0xC2B2AE3D27D4EB4Full);
}

}  // namespace ftjit_plugin_support

#endif
