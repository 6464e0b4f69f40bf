// SPDX-License-Identifier: MIT
// What a binary says about how it was compiled: the DW_AT_producer of each
// compile unit of its .debug_info. GCC records its command-line options
// there (-grecord-gcc-switches is its default): whether a module was built
// with -fpatchable-function-entry on the command line, or with the
// attribute alone, is evidence for what a trampoline must keep (TOOLCHAIN.md
// Q6) and that a module dropped records of its own sleds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/elf_image.h"
#include "core/error.h"

namespace ftjit {

// One compile unit's producer, and the DWARF version of its unit.
struct CompileUnitProducer {
  std::string producer;  // empty: the unit has no DW_AT_producer
  uint16_t version = 0;
  // The unit DIE has DW_AT_low_pc or DW_AT_ranges: the unit holds code
  // (a unit of declarations or data alone has neither).
  bool has_code = false;
};

// The producers of every compile and partial unit of `file`, whose
// sections `image` was parsed from (the same bytes). DWARF 2 to 5, 32- and
// 64-bit units; strings inline, in .debug_str, .debug_line_str, or through
// .debug_str_offsets (DWARF 5's strx forms). Empty when the file has no
// .debug_info, or when it is compressed (SHF_COMPRESSED: not read; no
// evidence). The input is hostile: every offset, length, count and string
// is checked before it is used, and anything malformed is FTJIT_E_ELF
// naming what, never a crash or an unbounded loop.
Result<std::vector<CompileUnitProducer>> compile_unit_producers(std::span<const uint8_t> file,
                                                                const ElfImage& image);

}  // namespace ftjit
