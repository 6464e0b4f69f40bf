// SPDX-License-Identifier: MIT
// Per-thread inline counter blocks (inline_blocks.h).
#include "runtime/inline_blocks.h"

#include <sys/mman.h>

#include <atomic>

#include "runtime/arch/arch.h"

namespace ftjit {
namespace {

constexpr size_t kBlockBytes = size_t{kInlineSlots} * sizeof(uint64_t);

// Every block ever made, newest first. A node is a small mapping of its
// own (every slot of a block is a counter), never freed: a reader may be
// walking it.
struct BlockNode {
  uint64_t* block;
  BlockNode* next;
};
std::atomic<BlockNode*> g_blocks{nullptr};

}  // namespace

// The pointer inline trampolines load; initial-exec, like the trampoline
// counts, so that its offset from the thread pointer is one constant.
extern "C" __thread uint64_t* ftjit_inline_block __attribute__((tls_model("initial-exec")));
__thread uint64_t* ftjit_inline_block = nullptr;

int64_t inline_block_tls_offset() {
  return static_cast<int64_t>(reinterpret_cast<uint64_t>(&ftjit_inline_block) - arch::thread_pointer());
}

bool ensure_inline_block() {
  if (ftjit_inline_block != nullptr) return true;
  void* block = mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (block == MAP_FAILED) return false;
  // The node shares no page with the counters: one page of its own
  // (malloc is not async-signal-safe).
  void* page = mmap(nullptr, sizeof(BlockNode), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    munmap(block, kBlockBytes);
    return false;
  }
  auto* node = static_cast<BlockNode*>(page);
  node->block = static_cast<uint64_t*>(block);
  node->next = g_blocks.load(std::memory_order_relaxed);
  while (!g_blocks.compare_exchange_weak(node->next, node, std::memory_order_release,
                                         std::memory_order_relaxed)) {
  }
  // Published to readers first, then to this thread's trampolines.
  ftjit_inline_block = node->block;
  return true;
}

uint64_t inline_slot_total(uint32_t slot) {
  if (slot >= kInlineSlots) return 0;
  uint64_t total = 0;
  for (BlockNode* n = g_blocks.load(std::memory_order_acquire); n != nullptr; n = n->next) {
    // Written by its thread's trampoline with plain (single-instruction)
    // updates: an aligned 64-bit load sees one whole value.
    total += __atomic_load_n(&n->block[slot], __ATOMIC_RELAXED);
  }
  return total;
}

void reset_inline_blocks() {
  for (BlockNode* n = g_blocks.load(std::memory_order_acquire); n != nullptr; n = n->next) {
    madvise(n->block, kBlockBytes, MADV_DONTNEED);
  }
}

}  // namespace ftjit
