// SPDX-License-Identifier: MIT
// Relocation of an IFUNC (memcpy, strlen): the symbol's value is its
// resolver, run once by the loader; the process calls what it returned.
// That implementation is what relocate_matching relocates, named by the
// IFUNC.
#pragma once

#include <cstdint>
#include <string>

#include "core/elf_image.h"
#include "core/error.h"

namespace ftjit {

struct IfuncImplementation {
  uint64_t address = 0;  // run-time
  std::string path;      // the module file holding it, and its load bias
  uint64_t load_bias = 0;
  std::string describe;  // "__memmove_avx_unaligned_erms (libc.so.6+0x18a7c0), from its IRELATIVE word"
};

// The implementation this process uses for `ifunc`, an IFUNC symbol of the
// module whose file is `path` (`image` parsed from it; `read_path` is where
// its bytes are read: /proc/self/exe for the main executable), loaded at
// `load_bias`: the word an IRELATIVE relocation of `irelative_type` filled
// for its resolver, else what dlsym returns for its name in that module
// (which runs the resolver).
Result<IfuncImplementation> ifunc_implementation(const std::string& path, const std::string& read_path,
                                                 uint64_t load_bias, const ElfImage& image, const ElfSymbol& ifunc,
                                                 uint32_t irelative_type);

}  // namespace ftjit
