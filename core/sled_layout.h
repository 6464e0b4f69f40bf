// SPDX-License-Identifier: MIT
// What compilers put beside a patchable function's NOPs, per ISA: the landing pad at the symbol.
#pragma once

#include <cstdint>
#include <span>

#include "core/site.h"

namespace ftjit {

// arm64 landing pads (FEAT_BTI). With -mbranch-protection=standard or =bti
// GCC 12 and clang 16 start every function they may reach indirectly with
// one, at the symbol, and put the entry NOPs after it; the sled then
// begins 4 bytes past the symbol. paciasp/pacibsp act as `bti c` when they
// are the first instruction, so hand-written or other compilers' code may
// begin with them instead. Discovery (site start) and the arm64 backend
// (classify_entry, find_arm64_sled) both read pads through this one list.
namespace arm64 {

inline constexpr uint32_t kBtiC = 0xd503245f;     // bti c
inline constexpr uint32_t kBtiJc = 0xd50324df;    // bti jc
inline constexpr uint32_t kPaciasp = 0xd503233f;  // paciasp (also a bti c landing pad)
inline constexpr uint32_t kPacibsp = 0xd503237f;  // pacibsp (likewise)
inline constexpr uint32_t kLandingPadBytes = 4;

inline bool is_landing_pad(uint32_t word) {
  return word == kBtiC || word == kBtiJc || word == kPaciasp || word == kPacibsp;
}

}  // namespace arm64

// Bytes of the landing pad that `at_symbol` (the code at a function's
// symbol) starts with, which the compiler placed before the function's
// sled: 4 for an arm64 pad above, 0 when there is none, when fewer than
// 4 bytes are given, and on every other ISA. (x86-64's endbr64, from
// -fcf-protection, is not one: the x86-64 backend refuses such entries.)
uint32_t landing_pad_bytes(Isa isa, std::span<const uint8_t> at_symbol);

// The length of the NOP instruction that `code` starts with, 0 when it
// starts with anything else (or is too short to tell). What counts is every
// encoding compilers and assemblers pad or sled with, not only the sled's:
// x86-64 0x90, `66 90`, `0f 1f /0` with any addressing form and 0x66/0x2e
// prefixes (GCC's and GAS's multi-byte NOPs, clang's `0f 1f 44 00 08`);
// arm64 `nop`; riscv64 `nop` and `c.nop`. Sled recovery reads sleds through
// it, and refuses a function whose sled is followed by one more NOP.
uint32_t nop_length(Isa isa, std::span<const uint8_t> code);

}  // namespace ftjit
