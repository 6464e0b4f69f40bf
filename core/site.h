// SPDX-License-Identifier: MIT
// What discovery knows about a patchable function entry and its module.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ftjit {

enum class Isa : uint8_t { kX86_64, kArm64, kRiscv64, kUnknown };

const char* isa_name(Isa isa);

// One record of __patchable_function_entries, resolved to run-time addresses.
//
//   record                     entry
//   |<-- prefix_bytes -------->|<-- sled at entry ... -->
//   [ M nops: ops slot (8 B)  ][ N-M nops             ][ function body
//
// prefix_bytes is 0 for -fpatchable-function-entry=N (M=0).
struct DiscoveredSite {
  uint64_t record = 0;        // run-time address of the first NOP
  uint64_t entry = 0;         // run-time address of the function symbol
  uint32_t prefix_bytes = 0;  // entry - record
  std::string name;           // symbol as in the symbol table (mangled)
  std::string demangled;      // demangled C++ name, == name for C symbols
};

// One loaded ELF object (executable or shared library) and its sites.
struct DiscoveredModule {
  std::string path;            // file path as the loader knows it
  uint64_t load_bias = 0;      // run-time address - link-time address
  Isa isa = Isa::kUnknown;
  bool has_patchable_section = false;
  std::vector<DiscoveredSite> sites;  // sorted by entry
};

}  // namespace ftjit
