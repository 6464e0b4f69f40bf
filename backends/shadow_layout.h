// SPDX-License-Identifier: MIT
// The shadow stack as trampolines see it: a generated trampoline pushes an
// entry itself, and the landing pops the common case itself (the newest
// entry is this frame's, no chain, no callback running on the thread),
// rather than calling into the runtime. runtime/shadow_stack.cpp checks
// its structures against these offsets at compile time.
#pragma once

#include <cstdint>

namespace ftjit::shadow_layout {

// struct ShadowStack (the thread's: a pointer in initial-exec TLS)
inline constexpr int32_t kDepth = 0;      // uint32_t entries in use
inline constexpr int32_t kHooks = 8;      // uint64_t returns hooked (owner-written)
inline constexpr uint32_t kCapacity = 1u << 20;
inline constexpr int32_t kEntries = 32;   // ShadowEntry[capacity]
inline constexpr int32_t kEntryBytes = 32;
// struct ShadowEntry
inline constexpr int32_t kSlot = 0;       // where the replaced return address lives
inline constexpr int32_t kRet = 8;        // the real return address
inline constexpr int32_t kIp = 16;        // the traced function's entry
inline constexpr int32_t kRecord = 24;    // ExitRecord*, | kUnhooked
inline constexpr uint64_t kUnhooked = 1;  // put back for an exception in flight
// struct ExitRecord
inline constexpr int32_t kFunc = 0;       // ftjit_exit_func_t
inline constexpr int32_t kOps = 8;        // ftjit_ops*
inline constexpr int32_t kLive = 16;      // bool: false once detached
inline constexpr int32_t kSaveFp = 17;    // bool: the callback may use xmm2-15
inline constexpr int32_t kKind = 18;      // uint8_t, below
inline constexpr int32_t kSite = 24;      // kInlineLatency: the site's entry
inline constexpr int32_t kBlockOffset = 32;  // kInlineLatency: its histogram's
                                             // byte offset in the thread's block
// What a record's exit does. kInlineLatency: no callback; the entry's kIp
// word holds the cycle counter read at the entry (an inline trampoline
// pushed it, backends/backend.h InlineAction::kLatency), and the exit adds
// the duration to the site's histogram in the thread's inline block.
inline constexpr uint8_t kKindCallback = 0;
inline constexpr uint8_t kKindInlineLatency = 1;

// An inline latency histogram, in 64-bit words of the thread's block
// (runtime/inline_blocks.h), at the record's kBlockOffset:
inline constexpr int32_t kHistTotalNs = 0;   // sum of the durations
inline constexpr int32_t kHistMaxNs = 1;     // the longest
inline constexpr int32_t kHistUnwound = 2;   // frames left by exception or longjmp
inline constexpr int32_t kHistBuckets = 3;   // [0]: 0 ns, [k]: [2^(k-1), 2^k) ns
inline constexpr int32_t kHistBucketCount = 65;
// Sampled inline latency (InlineRequest::sample_period N > 1): the calls
// this thread still skips before its next turn at the site; each call
// takes 1, a result below 0 is a turn (and the word becomes N-1). 0 in a
// new block: a site's first call on a thread is a turn.
inline constexpr int32_t kHistCountdown = kHistBuckets + kHistBucketCount;
inline constexpr int32_t kHistWords = kHistCountdown + 1;

}  // namespace ftjit::shadow_layout
