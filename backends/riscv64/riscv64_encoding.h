// SPDX-License-Identifier: MIT
// What the riscv64 sites part reads at a site: the compiler's NOPs, and
// the shape of the two instructions ftjit writes there (to recognise them:
// every instruction it writes comes from LLVM MC, riscv64_emitter.cpp).
// RISC-V code is little-endian: a 4-byte instruction is one 32-bit word,
// a compressed one a 16-bit halfword.
#pragma once

#include <cstdint>

namespace ftjit::riscv64 {

inline constexpr uint16_t kCNop = 0x0001;      // c.nop (rv64gc sleds: =8,4)
inline constexpr uint32_t kNop = 0x00000013;   // nop = addi x0, x0, 0 (rv64g: =4,2)

// auipc t0, <imm20>: opcode 0010111, rd = x5.
inline constexpr uint32_t kAuipcT0Mask = 0x00000fff;
inline constexpr uint32_t kAuipcT0 = 0x00000297;
// jalr t0, <imm12>(t0): opcode 1100111, funct3 0, rd = rs1 = x5.
inline constexpr uint32_t kJalrT0T0Mask = 0x000fffff;
inline constexpr uint32_t kJalrT0T0 = 0x000282e7;

inline constexpr uint32_t kInsnBytes = 4;
// auipc at the site start, the live word after it.
inline constexpr uint32_t kLiveOffset = 4;
inline constexpr uint32_t kSiteBytes = 8;
// The ops literal of both layouts: the 8 bytes just before the site start.
inline constexpr uint32_t kLiteralBytes = 8;

// The address an `auipc t0; jalr t0` pair at `at` calls (sign-extended
// immediates: U-type bits 31:12, I-type bits 31:20).
inline uint64_t pair_target(uint64_t at, uint32_t auipc, uint32_t jalr) {
  const int64_t hi = static_cast<int64_t>(static_cast<int32_t>(auipc & 0xfffff000u));
  const int64_t lo = static_cast<int64_t>(static_cast<int32_t>(jalr) >> 20);
  return at + static_cast<uint64_t>(hi + lo);
}

}  // namespace ftjit::riscv64
