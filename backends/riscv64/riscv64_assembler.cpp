// SPDX-License-Identifier: MIT
// LLVM MC as a run-time assembler (TOOLCHAIN.md Q2): per snippet a fresh
// MCContext, the RISC-V asm parser, and an ELF object streamer writing
// into memory; the snippet's .text is then read out of that object. The
// target's tables (register, instruction, subtarget info) are made once.
#include "backends/riscv64/riscv64_assembler.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/MC/MCAsmBackend.h>
#include <llvm/MC/MCAsmInfo.h>
#include <llvm/MC/MCCodeEmitter.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCObjectFileInfo.h>
#include <llvm/MC/MCObjectWriter.h>
#include <llvm/MC/MCParser/MCAsmParser.h>
#include <llvm/MC/MCParser/MCTargetAsmParser.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/MCStreamer.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/MCTargetOptions.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>

extern "C" void LLVMInitializeRISCVTargetInfo();
extern "C" void LLVMInitializeRISCVTargetMC();
extern "C" void LLVMInitializeRISCVAsmParser();

namespace ftjit::riscv64 {
namespace {

constexpr const char* kTriple = "riscv64-unknown-linux-gnu";

// What every snippet shares: made once, read-only afterwards.
struct TargetTables {
  const llvm::Target* target = nullptr;
  std::unique_ptr<llvm::MCRegisterInfo> regs;
  std::unique_ptr<llvm::MCAsmInfo> asm_info;
  std::unique_ptr<llvm::MCInstrInfo> instrs;
  // rv64imafd with and without c; relaxation off, so that every label
  // reference is resolved in the snippet, never left as R_RISCV_RELAX.
  std::unique_ptr<llvm::MCSubtargetInfo> rv64g, rv64gc;
  llvm::MCTargetOptions options;
  std::string error;
};

const TargetTables& tables() {
  static TargetTables t;
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeRISCVTargetInfo();
    LLVMInitializeRISCVTargetMC();
    LLVMInitializeRISCVAsmParser();
    std::string err;
    t.target = llvm::TargetRegistry::lookupTarget(kTriple, err);
    if (t.target == nullptr) {
      t.error = "LLVM has no RISC-V target: " + err;
      return;
    }
    t.regs.reset(t.target->createMCRegInfo(kTriple));
    t.asm_info.reset(t.target->createMCAsmInfo(*t.regs, kTriple, t.options));
    t.instrs.reset(t.target->createMCInstrInfo());
    t.rv64g.reset(t.target->createMCSubtargetInfo(kTriple, "generic-rv64", "+m,+a,+f,+d,-c,-relax"));
    t.rv64gc.reset(t.target->createMCSubtargetInfo(kTriple, "generic-rv64", "+m,+a,+f,+d,+c,-relax"));
    if (!t.regs || !t.asm_info || !t.instrs || !t.rv64g || !t.rv64gc) {
      t.error = "LLVM's RISC-V target is incomplete";
      t.target = nullptr;
    }
  });
  return t;
}

// The bytes of section `name` of a little-endian ELF64 relocatable
// object, and whether a section named `rela` has entries.
struct ObjectText {
  bool ok = false;
  std::vector<uint8_t> text;
  bool has_relocations = false;
};

template <typename T>
bool read_at(std::string_view obj, uint64_t off, T* out) {
  if (off > obj.size() || obj.size() - off < sizeof(T)) return false;
  std::memcpy(out, obj.data() + off, sizeof(T));
  return true;
}

ObjectText text_of(std::string_view obj) {
  ObjectText out;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read_at(obj, 0x28, &shoff) || !read_at(obj, 0x3a, &shentsize) || !read_at(obj, 0x3c, &shnum) ||
      !read_at(obj, 0x3e, &shstrndx) || shentsize < 64 || shstrndx >= shnum) {
    return out;
  }
  auto field = [&](uint16_t i, uint64_t at, auto* v) { return read_at(obj, shoff + uint64_t{i} * shentsize + at, v); };
  uint64_t names_off = 0;
  if (!field(shstrndx, 0x18, &names_off)) return out;
  bool found = false;
  for (uint16_t i = 0; i < shnum; ++i) {
    uint32_t name = 0;
    uint64_t off = 0, size = 0;
    if (!field(i, 0, &name) || !field(i, 0x18, &off) || !field(i, 0x20, &size)) return out;
    if (names_off + name >= obj.size()) return out;
    const std::string_view section_name(obj.data() + names_off + name);
    if (section_name == ".text") {
      if (off > obj.size() || obj.size() - off < size) return out;
      out.text.assign(obj.begin() + static_cast<ptrdiff_t>(off), obj.begin() + static_cast<ptrdiff_t>(off + size));
      found = true;
    } else if (section_name == ".rela.text" && size != 0) {
      out.has_relocations = true;
    }
  }
  out.ok = found;
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> assemble(const std::string& text, const AssembleOptions& opts) {
  const TargetTables& t = tables();
  if (t.target == nullptr) return make_error(FTJIT_E_INTERNAL, t.error);
  const llvm::MCSubtargetInfo& sti = opts.compressed ? *t.rv64gc : *t.rv64g;

  // The first diagnostic, with its line: a snippet is generated code, so
  // any error is ours, and the line says which instruction.
  std::string diagnostic;
  llvm::SourceMgr sources;
  sources.setDiagHandler(
      [](const llvm::SMDiagnostic& d, void* ctx) {
        auto* first = static_cast<std::string*>(ctx);
        if (!first->empty() || d.getKind() != llvm::SourceMgr::DK_Error) return;
        *first = "line " + std::to_string(d.getLineNo()) + ": " + d.getMessage().str() + " (`" +
                 d.getLineContents().trim().str() + "`)";
      },
      &diagnostic);
  sources.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "trampoline"), llvm::SMLoc());

  llvm::MCContext ctx(llvm::Triple(kTriple), t.asm_info.get(), t.regs.get(), &sti, &sources, &t.options);
  std::unique_ptr<llvm::MCObjectFileInfo> file_info(t.target->createMCObjectFileInfo(ctx, /*PIC=*/true));
  ctx.setObjectFileInfo(file_info.get());

  llvm::SmallString<1024> object;
  llvm::raw_svector_ostream os(object);
  std::unique_ptr<llvm::MCAsmBackend> backend(t.target->createMCAsmBackend(sti, *t.regs, t.options));
  std::unique_ptr<llvm::MCCodeEmitter> emitter(t.target->createMCCodeEmitter(*t.instrs, ctx));
  if (!backend || !emitter) return make_error(FTJIT_E_INTERNAL, "LLVM MC: no RISC-V asm backend or code emitter");
  std::unique_ptr<llvm::MCObjectWriter> writer = backend->createObjectWriter(os);
  std::unique_ptr<llvm::MCStreamer> streamer(t.target->createMCObjectStreamer(
      llvm::Triple(kTriple), ctx, std::move(backend), std::move(writer), std::move(emitter), sti,
      /*RelaxAll=*/false, /*IncrementalLinkerCompatible=*/false, /*DWARFMustBeAtTheEnd=*/false));
  std::unique_ptr<llvm::MCAsmParser> parser(llvm::createMCAsmParser(sources, ctx, *streamer, *t.asm_info));
  std::unique_ptr<llvm::MCTargetAsmParser> target_parser(
      t.target->createMCAsmParser(sti, *parser, *t.instrs, t.options));
  if (!parser || !target_parser) return make_error(FTJIT_E_INTERNAL, "LLVM MC: no RISC-V asm parser");
  parser->setTargetParser(*target_parser);
  // Run() parses, then finishes the streamer (fixups resolved, object
  // written); true on any error.
  const bool failed = parser->Run(/*NoInitialTextSection=*/false);
  if (failed || !diagnostic.empty() || ctx.hadError()) {
    return make_error(FTJIT_E_INTERNAL,
                      "LLVM MC cannot assemble RISC-V code: " + (diagnostic.empty() ? std::string("error") : diagnostic));
  }
  ObjectText out = text_of(std::string_view(object.data(), object.size()));
  if (!out.ok) return make_error(FTJIT_E_INTERNAL, "LLVM MC: no .text in the assembled object");
  if (out.has_relocations) {
    return make_error(FTJIT_E_INTERNAL,
                      "LLVM MC: the RISC-V snippet refers to something outside it (relocations left)");
  }
  return out.text;
}

}  // namespace ftjit::riscv64
