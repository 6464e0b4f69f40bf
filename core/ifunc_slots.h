// SPDX-License-Identifier: MIT
// Where a module keeps what its IFUNCs resolved to: the words its
// IRELATIVE relocations fill (R_X86_64_IRELATIVE, R_AARCH64_IRELATIVE,
// R_RISCV_IRELATIVE). The loader runs the resolver at the addend and stores
// the result in the word at load bias + r_offset, before the module's code
// runs; the module's own calls of that IFUNC go through the word, so it
// holds the implementation the process uses. ISA-neutral: the caller gives
// the type number (IsaTraits::reloc_irelative).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/elf_image.h"
#include "core/error.h"

namespace ftjit {

struct IrelativeSlot {
  uint64_t word = 0;      // link-time address of the word (r_offset)
  uint64_t resolver = 0;  // link-time address of the resolver (r_addend)
};

// The IRELATIVE relocations of `type` among the dynamic ones (DT_RELA and
// DT_JMPREL, found through PT_DYNAMIC) of the file `file` that `image` was
// parsed from, sorted by resolver. Empty for a file without PT_DYNAMIC;
// FTJIT_E_ELF when a table lies outside the file or is not whole entries.
// Reads `file` as hostile.
Result<std::vector<IrelativeSlot>> irelative_slots(std::span<const uint8_t> file, const ElfImage& image,
                                                   uint32_t type);

// The slots of `slots` (sorted) whose resolver is `resolver`.
std::span<const IrelativeSlot> irelative_slots_of(std::span<const IrelativeSlot> slots, uint64_t resolver);

// How an IFUNC's implementation at link-time `impl` of `image` is named:
// its symbol where the file has one there (.symtab, or an exported name),
// else "<ifunc_name> implementation".
std::string ifunc_implementation_name(const ElfImage& image, uint64_t impl, std::string_view ifunc_name);

}  // namespace ftjit
