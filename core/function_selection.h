// SPDX-License-Identifier: MIT
// The functions of an ELF file a filter selects, by symbol: what relocation
// (`ftjit list --relocate`, FTJIT_OPS_F_RELOCATE) works from, where no
// sled record names them.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/elf_image.h"
#include "core/filter.h"

namespace ftjit {

// One function: every symbol at its address (malloc is also
// __libc_malloc), and the first of those names the filter takes.
struct SelectedFunction {
  std::span<const ElfSymbol> symbols;  // all at one address, first the preferred
  const ElfSymbol* named = nullptr;    // the name the filter took
  std::string demangled;               // of `named`
  const ElfSymbol& symbol() const { return symbols.front(); }
};

// The functions of `image` (module basename `module_base`) that `filter`
// selects, once each, in address order. Only symbols in code sections.
std::vector<SelectedFunction> select_functions(const ElfImage& image, const Filter& filter,
                                               std::string_view module_base);

}  // namespace ftjit
