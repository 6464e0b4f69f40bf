// SPDX-License-Identifier: MIT
#include "core/module_file.h"

#include <algorithm>

namespace ftjit {

uint64_t file_fingerprint(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 0x100000001b3ull;
  };
  const size_t n = std::min<size_t>(bytes.size(), 64 * 1024);
  for (size_t i = 0; i < n; ++i) mix(bytes[i]);
  for (unsigned i = 0; i < 8; ++i) mix(static_cast<uint8_t>(bytes.size() >> (8 * i)));
  return h;
}

}  // namespace ftjit
