// SPDX-License-Identifier: MIT
// The per-thread counter blocks that inline trampolines (backends/
// backend.h, InlineRequest) write: one block per thread, an array of
// 64-bit counters, reached from the thread pointer without a call.
//
//   thread pointer + inline_block_tls_offset()  ->  block (0: none yet)
//   block[slot]   the thread's counter of one (ops, site): slots are the
//                 engine's, handed out once and never reused
//
// A block is reserved whole (kInlineSlots counters, address space only)
// and filled with pages as its counters are first written. A thread gets
// its block on its first inline call: the trampoline finds none and goes
// on to its fallback, whose callback path calls ensure_inline_block().
// Blocks are never unmapped while the library is loaded (a thread that
// exited keeps its counts for the report), and there are at most
// kMaxInlineBlocks of them; an engine that goes away gives their pages
// back (zeroing them) for the next one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ftjit {

// Counters per block: 8 MiB of address space each.
constexpr uint32_t kInlineSlots = 1u << 20;
// Blocks per process (one mapping each): the threads after that many stay
// on their ops' callbacks, which count as exactly.
constexpr uint32_t kMaxInlineBlocks = 4096;

// The calling thread's block (0: none yet), what the trampolines load.
extern "C" __thread uint64_t* ftjit_inline_block __attribute__((tls_model("initial-exec")));

// Offset of the calling thread's block pointer from the thread pointer
// (arch::thread_pointer), the same for every thread (initial-exec TLS).
int64_t inline_block_tls_offset();

// Sampled inline latency (backends/backend.h, InlineRequest::sample_period):
// the ExitRecord of the site whose call found no block and went on to the
// fallback, written by its trampoline; the first-call path gives the new
// block that site's countdown (the call it runs is the site's first turn).
extern "C" __thread uint64_t ftjit_inline_pending_record __attribute__((tls_model("initial-exec")));
int64_t inline_pending_tls_offset();

// Whether the callback running now was called by an inline trampoline's
// fallback (ftjit_inline_turn()): set around the call by the first-call path.
extern "C" __thread uint8_t ftjit_inline_fallback_call __attribute__((tls_model("initial-exec")));

// Gives the calling thread its block if it has none. Async-signal-safe
// (mmap and an atomic push): it may run inside any traced function.
// false if the memory could not be had (the thread stays on callbacks).
bool ensure_inline_block();

// The sum of counter `slot` over every thread's block, each read whole
// while the threads go on.
uint64_t inline_slot_total(uint32_t slot);

// Every thread's block so far, each once: visit(block). Their words are
// written by their threads with single-instruction updates, so each is
// read whole (with __atomic_load_n, relaxed) while the threads go on.
template <typename Visit>
void for_each_inline_block(Visit visit);

// Zeroes every block (their pages go back to the kernel). Only when no
// thread can be inside an inline trampoline (after a grace period with
// none reachable).
void reset_inline_blocks();

namespace detail {
uint32_t inline_blocks_claimed();
const uint64_t* inline_block_at(uint32_t index);
}  // namespace detail

template <typename Visit>
void for_each_inline_block(Visit visit) {
  const uint32_t n = detail::inline_blocks_claimed();
  for (uint32_t i = 0; i < n; ++i) {
    if (const uint64_t* block = detail::inline_block_at(i)) visit(block);
  }
}

}  // namespace ftjit
