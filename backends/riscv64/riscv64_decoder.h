// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include "core/instruction_decoder.h"

namespace ftjit::riscv64 {

// LLVM MC's RISC-V disassembler (rv64gc and the bit-manipulation
// extensions) behind the seam (core/instruction_decoder.h).
const InstructionDecoder& riscv64_decoder();
// Empty when LLVM's RISC-V tables were made.
std::string riscv64_decoder_error();

}  // namespace ftjit::riscv64
