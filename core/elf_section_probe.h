// SPDX-License-Identifier: MIT
// Whether an ELF file has a section of a given name, from three small
// reads (the ELF header, the section headers, their names) rather than a
// mapping of the whole file. Module scans ask it of every loaded object,
// most of which (libc, the loader, libraries built without
// -fpatchable-function-entry) have no patchable records: mapping each
// such file and unmapping it again costs page faults and, in a process
// whose threads run on other CPUs, a TLB shootdown each.
#pragma once

#include <string_view>

#include "core/site.h"

namespace ftjit {

inline constexpr std::string_view kPatchableSectionName = "__patchable_function_entries";

struct SectionProbe {
  // kUnknown: anything this reader does not vouch for (not an ELF64 LE
  // executable or shared object, extended section numbering, a short
  // read, an out-of-range field): the caller parses the file whole, and
  // reports its errors.
  enum State { kAbsent, kPresent, kUnknown } state = kUnknown;
  Isa isa = Isa::kUnknown;  // e_machine, when the header was read
};

// `fd`: open for reading; read with pread only (its offset is left alone).
SectionProbe probe_elf_section(int fd, std::string_view name);

}  // namespace ftjit
