// SPDX-License-Identifier: MIT
// Per-thread inline counter blocks (inline_blocks.h).
#include "runtime/inline_blocks.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>

#include "runtime/arch/arch.h"

namespace ftjit {
namespace {

constexpr size_t kBlockBytes = size_t{kInlineSlots} * sizeof(uint64_t);

// Every block ever made, in the order threads got them. Bounded: each is
// a mapping of the process's, and a program that makes threads without
// end must not run out of mappings because of us; threads beyond the
// bound stay on callbacks (their counts are as exact, only dearer).
std::atomic<uint64_t*> g_blocks[kMaxInlineBlocks];
std::atomic<uint32_t> g_claimed{0};

}  // namespace

// The pointer inline trampolines load; initial-exec, like the trampoline
// counts, so that its offset from the thread pointer is one constant.
__thread uint64_t* ftjit_inline_block = nullptr;

int64_t inline_block_tls_offset() {
  return static_cast<int64_t>(reinterpret_cast<uint64_t>(&ftjit_inline_block) - arch::thread_pointer());
}

__thread uint64_t ftjit_inline_pending_record = 0;
__thread uint8_t ftjit_inline_fallback_call = 0;

int64_t inline_pending_tls_offset() {
  return static_cast<int64_t>(reinterpret_cast<uint64_t>(&ftjit_inline_pending_record) - arch::thread_pointer());
}

bool ensure_inline_block() {
  if (ftjit_inline_block != nullptr) return true;
  // Past the bound one load says so: no more claims, no more mappings.
  if (g_claimed.load(std::memory_order_relaxed) >= kMaxInlineBlocks) return false;
  const uint32_t index = g_claimed.fetch_add(1, std::memory_order_relaxed);
  if (index >= kMaxInlineBlocks) return false;
  void* block = mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (block == MAP_FAILED) return false;  // its index stays empty
  // Published to readers first, then to this thread's trampolines.
  g_blocks[index].store(static_cast<uint64_t*>(block), std::memory_order_release);
  ftjit_inline_block = static_cast<uint64_t*>(block);
  return true;
}

namespace detail {
uint32_t inline_blocks_claimed() {
  return std::min(g_claimed.load(std::memory_order_acquire), kMaxInlineBlocks);
}
const uint64_t* inline_block_at(uint32_t index) { return g_blocks[index].load(std::memory_order_acquire); }
}  // namespace detail

uint64_t inline_slot_total(uint32_t slot) {
  if (slot >= kInlineSlots) return 0;
  uint64_t total = 0;
  // Written by its thread's trampoline with single-instruction updates:
  // an aligned 64-bit load sees one whole value.
  for_each_inline_block([&](const uint64_t* block) { total += __atomic_load_n(&block[slot], __ATOMIC_RELAXED); });
  return total;
}

void reset_inline_blocks() {
  const uint32_t n = std::min(g_claimed.load(std::memory_order_acquire), kMaxInlineBlocks);
  for (uint32_t i = 0; i < n; ++i) {
    if (uint64_t* block = g_blocks[i].load(std::memory_order_acquire)) madvise(block, kBlockBytes, MADV_DONTNEED);
  }
}

}  // namespace ftjit
