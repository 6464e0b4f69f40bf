// SPDX-License-Identifier: MIT
#include "backends/llvm/llvm_disassembler.h"

#include <llvm/MC/MCAsmInfo.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCDisassembler/MCDisassembler.h>
#include <llvm/MC/MCInst.h>
#include <llvm/MC/MCInstrAnalysis.h>
#include <llvm/MC/MCInstrDesc.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/MCTargetOptions.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Triple.h>

namespace ftjit::llvm_mc {

struct Disassembler::Tables {
  std::unique_ptr<llvm::MCRegisterInfo> regs;
  std::unique_ptr<llvm::MCAsmInfo> asm_info;
  std::unique_ptr<llvm::MCInstrInfo> instrs;
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget;
  std::unique_ptr<llvm::MCContext> context;
  std::unique_ptr<llvm::MCDisassembler> disassembler;
  std::unique_ptr<llvm::MCInstrAnalysis> analysis;
  llvm::MCTargetOptions options;
};

Disassembler::Disassembler(const char* triple, const char* cpu, const char* features)
    : t_(std::make_unique<Tables>()) {
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (target == nullptr) {
    error_ = std::string("LLVM has no target for ") + triple + ": " + err;
    return;
  }
  t_->regs.reset(target->createMCRegInfo(triple));
  if (t_->regs) t_->asm_info.reset(target->createMCAsmInfo(*t_->regs, triple, t_->options));
  t_->instrs.reset(target->createMCInstrInfo());
  t_->subtarget.reset(target->createMCSubtargetInfo(triple, cpu, features));
  if (!t_->regs || !t_->asm_info || !t_->instrs || !t_->subtarget) {
    error_ = std::string("LLVM's tables for ") + triple + " are incomplete";
    return;
  }
  t_->context = std::make_unique<llvm::MCContext>(llvm::Triple(triple), t_->asm_info.get(), t_->regs.get(),
                                                  t_->subtarget.get());
  t_->disassembler.reset(target->createMCDisassembler(*t_->subtarget, *t_->context));
  t_->analysis.reset(target->createMCInstrAnalysis(t_->instrs.get()));
  if (!t_->disassembler || !t_->analysis) error_ = std::string("LLVM has no disassembler for ") + triple;
}

Disassembler::~Disassembler() = default;

const llvm::MCInstrInfo& Disassembler::instrs() const { return *t_->instrs; }

std::optional<Disassembler::Result> Disassembler::decode(uint64_t address, std::span<const uint8_t> bytes,
                                                         llvm::MCInst* inst_out) const {
  if (!error_.empty() || bytes.empty()) return std::nullopt;
  llvm::MCInst inst;
  uint64_t size = 0;
  const auto status = t_->disassembler->getInstruction(
      inst, size, llvm::ArrayRef<uint8_t>(bytes.data(), bytes.size()), address, llvm::nulls());
  if (status != llvm::MCDisassembler::Success || size == 0) return std::nullopt;
  Result r;
  r.size = size;
  r.opcode = inst.getOpcode();
  r.desc = &t_->instrs->get(r.opcode);
  r.name = t_->instrs->getName(r.opcode).str();
  uint64_t target = 0;
  if ((r.desc->isBranch() || r.desc->isCall()) && t_->analysis->evaluateBranch(inst, address, size, target))
    r.branch_target = target;
  if (auto m = t_->analysis->evaluateMemoryOperandAddress(inst, t_->subtarget.get(), address, size)) {
    r.memory_target = *m;
    r.memory_field_offset = t_->analysis->getMemoryOperandRelocationOffset(inst, size);
  }
  if (inst_out != nullptr) *inst_out = inst;
  return r;
}

}  // namespace ftjit::llvm_mc
