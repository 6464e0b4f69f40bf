// SPDX-License-Identifier: MIT
// What a binary says about how it was compiled: the DW_AT_producer of each
// compile unit of its .debug_info, read with elfutils' libdw. GCC records
// its command-line options there (-grecord-gcc-switches is its default):
// whether a module was built with -fpatchable-function-entry on the command
// line, or with the attribute alone, is evidence for what a trampoline must
// keep (TOOLCHAIN.md Q6) and that a module dropped records of its own sleds.
//
// Like core/dwarf_signatures.h this is host work (library ftjit_dwarf, in
// builds that have libdw): a traced process never reads DWARF itself; its
// agent asks its code generator, the CLI (runtime/module_scan.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

// The producers of every compile, partial and skeleton unit of the ELF file
// at `path` (type units have none worth reading). Empty when the file has
// no DWARF; sections compressed with SHF_COMPRESSED are read too. A file
// that is not ELF, or whose DWARF libdw cannot read, is FTJIT_E_ELF naming
// why (FTJIT_E_SYSTEM when it cannot be opened).
Result<std::vector<CompileUnitProducer>> compile_unit_producers(const std::string& path);

// The same of an ELF image in memory (tests, fuzzing); the bytes are copied
// first, never written.
Result<std::vector<CompileUnitProducer>> compile_unit_producers(std::span<const uint8_t> image);

}  // namespace ftjit
