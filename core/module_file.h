// SPDX-License-Identifier: MIT
// A module's file as a process names it, with what tells that another
// process opened the same file: a generator reading a module for a traced
// process (its DWARF, its entries) checks size and fingerprint first, since
// a path can name another file there (a qemu-user guest's /lib is the
// host's /usr/<triple>/lib; a file replaced since it was mapped).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ftjit {

struct ModuleFile {
  std::string path;          // as the process names it
  uint64_t size = 0;         // bytes
  uint64_t fingerprint = 0;  // file_fingerprint of its bytes
};

// FNV-1a over the first 64 KiB (the ELF header, program headers and the
// start of the code or of the section header table) and the size.
uint64_t file_fingerprint(std::span<const uint8_t> bytes);

}  // namespace ftjit
