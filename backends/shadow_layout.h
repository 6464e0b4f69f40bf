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

}  // namespace ftjit::shadow_layout
