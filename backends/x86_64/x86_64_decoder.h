// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include "core/instruction_decoder.h"

namespace ftjit::x86_64 {

// LLVM MC's x86-64 disassembler behind the seam (core/instruction_decoder.h).
const InstructionDecoder& x86_64_decoder();
// Empty when LLVM's x86 tables were made.
std::string x86_64_decoder_error();

}  // namespace ftjit::x86_64
