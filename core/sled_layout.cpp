// SPDX-License-Identifier: MIT
// landing_pad_bytes: the pad a compiler puts at a function's symbol, before its sled.
#include "core/sled_layout.h"

#include <cstring>

namespace ftjit {

uint32_t landing_pad_bytes(Isa isa, std::span<const uint8_t> at_symbol) {
  if (isa != Isa::kArm64 || at_symbol.size() < arm64::kLandingPadBytes) return 0;
  uint32_t word;  // a64 code is little-endian whatever the data endianness
  std::memcpy(&word, at_symbol.data(), sizeof word);
  return arm64::is_landing_pad(word) ? arm64::kLandingPadBytes : 0;
}

}  // namespace ftjit
