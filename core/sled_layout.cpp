// SPDX-License-Identifier: MIT
// landing_pad_bytes and nop_length: what a compiler puts at a function's symbol, around its sled.
#include "core/sled_layout.h"

#include <cstring>

namespace ftjit {

uint32_t landing_pad_bytes(Isa isa, std::span<const uint8_t> at_symbol) {
  if (isa != Isa::kArm64 || at_symbol.size() < arm64::kLandingPadBytes) return 0;
  uint32_t word;  // a64 code is little-endian whatever the data endianness
  std::memcpy(&word, at_symbol.data(), sizeof word);
  return arm64::is_landing_pad(word) ? arm64::kLandingPadBytes : 0;
}

namespace {

// x86-64: where `0f 1f /r` (nopw/nopl) at `at` ends, which its ModRM
// addressing form decides; 0 when `code` does not hold one there.
uint32_t x86_nopl_end(std::span<const uint8_t> code, size_t at) {
  if (code.size() < at + 3 || code[at] != 0x0f || code[at + 1] != 0x1f) return 0;
  const uint8_t modrm = code[at + 2];
  const unsigned mod = modrm >> 6, rm = modrm & 7;
  uint32_t length = 3;
  if (mod != 3 && rm == 4) {  // a SIB byte follows
    if (code.size() < at + 4) return 0;
    ++length;
    if (mod == 0 && (code[at + 3] & 7) == 5) length += 4;  // SIB with disp32, no base
  }
  if (mod == 1) length += 1;
  if (mod == 2 || (mod == 0 && rm == 5)) length += 4;
  return code.size() >= at + length ? static_cast<uint32_t>(at + length) : 0;
}

uint32_t x86_nop_length(std::span<const uint8_t> code) {
  // Operand-size and segment prefixes pad multi-byte NOPs (`66 2e 0f 1f
  // 84 ...`); more than an instruction can hold is no instruction.
  constexpr size_t kMaxInstruction = 15;
  size_t at = 0;
  bool segment = false;
  while (at < code.size() && at < kMaxInstruction && (code[at] == 0x66 || code[at] == 0x2e)) {
    segment |= code[at] == 0x2e;
    ++at;
  }
  if (at < code.size() && code[at] == 0x90) return segment ? 0 : static_cast<uint32_t>(at + 1);
  const uint32_t end = x86_nopl_end(code, at);
  return end <= kMaxInstruction ? end : 0;
}

uint32_t load_u32(std::span<const uint8_t> code) {
  uint32_t word;  // a64 and riscv64 code is little-endian
  std::memcpy(&word, code.data(), sizeof word);
  return word;
}

}  // namespace

uint32_t nop_length(Isa isa, std::span<const uint8_t> code) {
  constexpr uint32_t kA64Nop = 0xd503201f;
  constexpr uint32_t kRvNop = 0x00000013;    // addi x0, x0, 0
  constexpr uint16_t kRvCNop = 0x0001;       // c.nop
  switch (isa) {
    case Isa::kX86_64: return x86_nop_length(code);
    case Isa::kArm64: return code.size() >= 4 && load_u32(code) == kA64Nop ? 4 : 0;
    case Isa::kRiscv64: {
      if (code.size() < 2) return 0;
      const uint16_t half = static_cast<uint16_t>(code[0] | code[1] << 8);
      if ((half & 3) != 3) return half == kRvCNop ? 2 : 0;  // a compressed instruction
      return code.size() >= 4 && load_u32(code) == kRvNop ? 4 : 0;
    }
    case Isa::kUnknown: break;
  }
  return 0;
}

}  // namespace ftjit
