// SPDX-License-Identifier: MIT
// The x86-64 bytes both halves of the backend speak (see x86_64_backend.cpp).
#pragma once

#include <cstdint>

namespace ftjit::x86_64 {
inline constexpr uint8_t kOneByteNop = 0x90;                               // nop
inline constexpr uint8_t kNop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};        // nopl 0(%rax,%rax,1)
inline constexpr uint8_t kCallRel32 = 0xe8;                                // call rel32
inline constexpr uint8_t kJmpRel32 = 0xe9;                                 // jmp rel32
inline constexpr uint8_t kInt3 = 0xcc;                                     // int3
inline constexpr uint32_t kSiteBytes = 5;
// A site's stub (x86_64_backend.cpp, (c)): code, the site's return
// address, the trampoline word.
inline constexpr uint32_t kStubBytes = 32;
inline constexpr uint32_t kStubReturnOffset = 16;
inline constexpr uint32_t kStubWordOffset = 24;

inline bool fits_rel32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

}  // namespace ftjit::x86_64
