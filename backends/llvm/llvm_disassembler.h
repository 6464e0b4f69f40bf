// SPDX-License-Identifier: MIT
// LLVM MC's disassembler for one target triple, made once and then only
// read (any thread): the part of every ISA's InstructionDecoder that is
// LLVM's, so that an ISA's decoder file holds only what is its own (which
// opcodes are syscalls, landing pads, exclusives).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace llvm {
class MCInst;
class MCInstrDesc;
class MCInstrInfo;
class MCSubtargetInfo;
}  // namespace llvm

namespace ftjit::llvm_mc {

struct Decoded;

class Disassembler {
 public:
  // The target's initialisation is the caller's (LLVMInitialize<T>...),
  // done before: the registry lookup needs it.
  Disassembler(const char* triple, const char* cpu, const char* features);
  ~Disassembler();
  Disassembler(const Disassembler&) = delete;
  Disassembler& operator=(const Disassembler&) = delete;

  // Empty when the tables were made, else why not.
  const std::string& error() const { return error_; }

  // One instruction at `address`, or nullopt when the bytes are none.
  struct Result {
    uint64_t size = 0;
    unsigned opcode = 0;
    const llvm::MCInstrDesc* desc = nullptr;
    // A direct branch's or call's target (MCInstrAnalysis::evaluateBranch).
    std::optional<uint64_t> branch_target;
    // The address a PC-relative memory operand refers to
    // (MCInstrAnalysis::evaluateMemoryOperandAddress).
    std::optional<uint64_t> memory_target;
    // Where that operand's displacement sits in the instruction, when LLVM
    // says (MCInstrAnalysis::getMemoryOperandRelocationOffset; x86 does not
    // when an immediate follows it).
    std::optional<uint64_t> memory_field_offset;
    std::string name;  // the opcode's name, as LLVM's tables spell it
  };
  std::optional<Result> decode(uint64_t address, std::span<const uint8_t> bytes,
                               llvm::MCInst* inst_out = nullptr) const;

  const llvm::MCInstrInfo& instrs() const;

 private:
  struct Tables;
  std::unique_ptr<Tables> t_;
  std::string error_;
};

}  // namespace ftjit::llvm_mc
