// SPDX-License-Identifier: MIT
// RISC-V assembly text to machine code, with LLVM's MC layer (the target
// registry, the RISC-V asm parser and code emitter, an ELF object
// streamer into memory). The only file of ftjit that includes LLVM: its
// -fno-exceptions flags stay in riscv64_assembler.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ftjit::riscv64 {

struct AssembleOptions {
  // With the C extension the assembler picks 2-byte encodings where one
  // exists (`jr t1` -> c.jr); without it, every instruction is 4 bytes
  // and the code runs on rv64g harts too. `.option norvc` / `rvc` in the
  // text override it locally.
  bool compressed = false;
};

// The bytes of `text`'s .text section, assembled as rv64imafd(c) with
// linker relaxation off. Every label reference must resolve inside the
// snippet (nothing may be left for a linker): the code may then be copied
// anywhere, since nothing in it depends on its address. FTJIT_E_INTERNAL
// with the assembler's first diagnostic (line and message) otherwise.
Result<std::vector<uint8_t>> assemble(const std::string& text, const AssembleOptions& options = {});

}  // namespace ftjit::riscv64
