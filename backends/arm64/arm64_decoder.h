// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include "core/instruction_decoder.h"

namespace ftjit::arm64 {

// LLVM MC's AArch64 disassembler behind the seam (core/instruction_decoder.h).
const InstructionDecoder& arm64_decoder();
// Empty when LLVM's AArch64 tables were made.
std::string arm64_decoder_error();

}  // namespace ftjit::arm64
