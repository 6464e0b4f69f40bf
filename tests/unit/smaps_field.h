// SPDX-License-Identifier: MIT
// For the bulk-memory tests: a field of the mapping that holds an address
// (/proc/self/smaps), and whether this build runs under AddressSanitizer
// (whose arrays stay on the heap, with no mapping of their own).
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FTJIT_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FTJIT_TEST_ASAN 1
#endif

namespace ftjit {

// The line starting with `field` ("Rss:", "VmFlags:") of the mapping that
// holds `p`, empty if there is none.
inline std::string smaps_field_of(const void* p, std::string_view field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = at >= lo && at < hi;
      continue;
    }
    if (inside && line.rfind(field, 0) == 0) return line;
  }
  return {};
}

}  // namespace ftjit
