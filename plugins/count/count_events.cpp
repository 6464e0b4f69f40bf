// SPDX-License-Identifier: MIT
// count plugin, event path: a hash and an increment per call. Compiled with
// -mgeneral-regs-only, which lets the descriptor set FTJIT_PLUGIN_F_NO_FP.
#include "count.h"

namespace ftjit_count {

const ftjit_host *g_host = nullptr;

// The SDK hands callbacks a ctx but no slot for plugin data, and the event
// path may not lock: instances are found in this fixed, lock-free table.
namespace {
constexpr int kMaxInstances = 32;
std::atomic<ftjit_plugin_ctx *> g_instance_keys[kMaxInstances];
std::atomic<Instance *> g_instances[kMaxInstances];
}  // namespace

bool register_instance(Instance *instance) {
  for (int i = 0; i < kMaxInstances; ++i) {
    ftjit_plugin_ctx *expected = nullptr;
    if (g_instance_keys[i].load(std::memory_order_relaxed) != nullptr) continue;
    g_instances[i].store(instance, std::memory_order_relaxed);
    if (g_instance_keys[i].compare_exchange_strong(expected, instance->ctx,
                                                   std::memory_order_release))
      return true;
  }
  return false;
}

void unregister_instance(ftjit_plugin_ctx *ctx) {
  for (int i = 0; i < kMaxInstances; ++i)
    if (g_instance_keys[i].load(std::memory_order_acquire) == ctx)
      g_instance_keys[i].store(nullptr, std::memory_order_release);
}

Instance *find_instance(ftjit_plugin_ctx *ctx) {
  for (int i = 0; i < kMaxInstances; ++i)
    if (g_instance_keys[i].load(std::memory_order_acquire) == ctx)
      return g_instances[i].load(std::memory_order_relaxed);
  return nullptr;
}

namespace {

// Taken once per thread: the first call of a thread claims a pooled table.
__attribute__((noinline)) bool claim_table(ftjit_plugin_ctx *ctx,
                                           ThreadSlot *slot) {
  Instance *instance = find_instance(ctx);
  if (instance == nullptr) {
    slot->state = SlotState::kRefused;
    return false;
  }
  slot->instance = instance;
  uint32_t index =
      instance->tables_claimed.fetch_add(1, std::memory_order_relaxed);
  if (index >= instance->max_threads) {
    slot->state = SlotState::kRefused;
    return false;
  }
  slot->counters = instance->counters + uint64_t(index) * instance->table_size;
  slot->header = instance->headers + index;
  slot->state = SlotState::kClaimed;
  return true;
}

}  // namespace

void on_entry(uint64_t ip, uint64_t, ftjit_plugin_ctx *ctx,
              ftjit_plugin_regs *) {
  auto *slot = static_cast<ThreadSlot *>(g_host->thread_storage(ctx));
  if (slot == nullptr) return;  // the host ran out of memory for this thread
  if (slot->state != SlotState::kClaimed) {
    if (slot->state == SlotState::kRefused || !claim_table(ctx, slot)) {
      if (slot->instance != nullptr)
        slot->instance->unpooled_calls.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  const Instance *instance = slot->instance;
  // Fibonacci hashing: entry addresses are aligned, the multiply spreads them.
  const uint64_t mask = instance->table_size - 1;
  uint64_t index = ((ip * 0x9E3779B97F4A7C15ull) >> instance->hash_shift) & mask;
  for (;;) {
    Counter &counter = slot->counters[index];
    if (counter.ip == ip) {
      ++counter.calls;
      return;
    }
    if (counter.ip == 0) break;
    index = (index + 1) & mask;
  }
  // The load limit keeps an empty slot in every probe sequence.
  TableHeader *header = slot->header;
  if (header->used >= instance->load_limit || ip == 0) {
    ++header->overflow_calls;
    return;
  }
  ++header->used;
  slot->counters[index].ip = ip;
  slot->counters[index].calls = 1;
}

}  // namespace ftjit_count
