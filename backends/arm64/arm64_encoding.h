// SPDX-License-Identifier: MIT
// The a64 words both halves of the arm64 backend speak (arm64_backend.cpp
// verifies and writes them at sites, arm64_emitter.cpp never needs them).
// Each is one little-endian 32-bit instruction word.
#pragma once

#include <cstdint>

#include "core/sled_layout.h"  // the landing pads (kBtiC, ...): discovery reads them too

namespace ftjit::arm64 {

inline constexpr uint32_t kNop = 0xd503201f;          // nop
inline constexpr uint32_t kMovX9X30 = 0xaa1e03e9;     // mov x9, x30 (orr x9, xzr, x30)
inline constexpr uint32_t kBlOpcode = 0x94000000;     // bl <imm26 * 4>
inline constexpr uint32_t kBOpcode = 0x14000000;      // b  <imm26 * 4>
inline constexpr uint32_t kBranchOpcodeMask = 0xfc000000;
inline constexpr uint32_t kBranchImmMask = 0x03ffffff;

inline constexpr uint32_t kInsnBytes = 4;
// mov x9, x30 at the site start, the live word after it.
inline constexpr uint32_t kLiveOffset = 4;
inline constexpr uint32_t kSiteBytes = 8;
// The ops literal of =4,2 sites: the 8 bytes just before the site start.
inline constexpr uint32_t kLiteralBytes = 8;

// bl/b reach: a signed 26-bit word offset, [-128 MiB, +128 MiB - 4].
inline constexpr int64_t kBranchMin = -(int64_t{1} << 27);
inline constexpr int64_t kBranchMax = (int64_t{1} << 27) - 4;

inline bool branch_reaches(uint64_t from, uint64_t to) {
  const int64_t delta = static_cast<int64_t>(to - from);
  return (delta & 3) == 0 && delta >= kBranchMin && delta <= kBranchMax;
}

// `opcode` (kBlOpcode or kBOpcode) from `from` to `to`; the caller checked
// branch_reaches.
inline uint32_t encode_branch(uint32_t opcode, uint64_t from, uint64_t to) {
  const int64_t delta = static_cast<int64_t>(to - from);
  return opcode | (static_cast<uint32_t>(delta >> 2) & kBranchImmMask);
}

// The target of a b/bl word at `from` (sign-extends imm26).
inline uint64_t branch_target(uint32_t word, uint64_t from) {
  const int64_t imm26 = static_cast<int64_t>(static_cast<int32_t>(word << 6) >> 6);
  return from + static_cast<uint64_t>(imm26 * 4);
}

}  // namespace ftjit::arm64
