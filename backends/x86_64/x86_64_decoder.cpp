// SPDX-License-Identifier: MIT
// x86-64 instructions as the relocator sees them (core/instruction_decoder.h),
// decoded by LLVM MC. The classes come from LLVM's own instruction flags
// (branch, call, return, indirect) and its evaluation of branch targets and
// RIP-relative operands; only what those flags do not say is named here:
// the instructions that enter the kernel or trap, endbr64, and the short
// branches that have no rel32 form to be moved with.
#include "backends/x86_64/x86_64_decoder.h"

#include <llvm/MC/MCInstrDesc.h>

#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>

#include "backends/llvm/llvm_disassembler.h"

extern "C" void LLVMInitializeX86TargetInfo();
extern "C" void LLVMInitializeX86TargetMC();
extern "C" void LLVMInitializeX86Disassembler();

namespace ftjit::x86_64 {
namespace {

const llvm_mc::Disassembler& disassembler() {
  static std::once_flag once;
  static const llvm_mc::Disassembler* d = nullptr;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86Disassembler();
    d = new llvm_mc::Disassembler("x86_64-unknown-linux-gnu", "x86-64", "");
  });
  return *d;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

// Where a RIP-relative operand's disp32 sits: LLVM's answer when it has
// one, else the one place it can be, 4 bytes before an immediate of 0, 1,
// 2 or 4 bytes, whose value is the distance from the next instruction to
// the target. Two places that both fit (an immediate equal to the
// displacement) leave it unknown: the relocator moves no guess.
bool find_displacement(DecodedInsn& insn, std::span<const uint8_t> bytes, std::optional<uint64_t> llvm_offset) {
  const int64_t want = static_cast<int64_t>(insn.target - (insn.address + insn.size));
  auto holds = [&](uint64_t at) {
    if (at + 4 > insn.size || at + 4 > bytes.size()) return false;
    int32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v == want;
  };
  if (llvm_offset && holds(*llvm_offset)) {
    insn.field_offset = static_cast<uint8_t>(*llvm_offset);
    insn.field_bytes = 4;
    return true;
  }
  int found = -1;
  for (uint64_t imm : {0, 1, 2, 4}) {
    if (insn.size < 4 + imm + 2) continue;  // opcode and ModRM at least
    const uint64_t at = insn.size - 4 - imm;
    if (!holds(at)) continue;
    if (found >= 0) return false;
    found = static_cast<int>(at);
  }
  if (found < 0) return false;
  insn.field_offset = static_cast<uint8_t>(found);
  insn.field_bytes = 4;
  return true;
}

bool fits_int32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

void append_rel32(std::vector<uint8_t>* out, int64_t rel) {
  const int32_t r = static_cast<int32_t>(rel);
  const auto* p = reinterpret_cast<const uint8_t*>(&r);
  out->insert(out->end(), p, p + 4);
}

class X86Decoder final : public InstructionDecoder {
 public:
  Isa isa() const override { return Isa::kX86_64; }
  uint32_t resync_bytes() const override { return 1; }
  uint32_t entry_branch_bytes() const override { return 5; }

  bool append_branch(uint64_t at, uint64_t target, std::vector<uint8_t>* out) const override {
    const int64_t rel = static_cast<int64_t>(target - (at + 5));
    if (!fits_int32(rel)) return false;
    out->push_back(0xe9);  // jmp rel32
    append_rel32(out, rel);
    return true;
  }

  //   Jcc rel8   7x rel8          ->  0f 8x rel32
  //   Jcc rel32  0f 8x rel32      ->  0f 8x rel32
  //   jmp rel8   eb rel8          ->  e9 rel32
  //   jmp rel32  e9 rel32         ->  e9 rel32
  //   RIP-relative: the same bytes, disp32 recomputed for the new address
  // (A branch's prefixes, bnd or a hint, are dropped: they change nothing
  // a relocated copy needs.)
  bool relocate(const DecodedInsn& insn, std::span<const uint8_t> bytes, uint64_t to,
                std::vector<uint8_t>* out) const override {
    if (bytes.size() < insn.size) return false;
    switch (insn.cls) {
      case InsnClass::kPlain:
        out->insert(out->end(), bytes.begin(), bytes.begin() + insn.size);
        return true;
      case InsnClass::kPcRelative: {
        if (insn.field_bytes != 4) return false;
        const int64_t rel = static_cast<int64_t>(insn.target - (to + insn.size));
        if (!fits_int32(rel)) return false;
        const size_t start = out->size();
        out->insert(out->end(), bytes.begin(), bytes.begin() + insn.size);
        const int32_t r = static_cast<int32_t>(rel);
        std::memcpy(out->data() + start + insn.field_offset, &r, 4);
        return true;
      }
      case InsnClass::kCondBranch:
      case InsnClass::kJump: {
        // The opcode: the byte before the field (rel8, or e9), or the two
        // (0f 8x).
        const uint8_t op = bytes[insn.field_offset - 1];
        uint8_t cc = 0xff;
        if (insn.field_bytes == 1 && op >= 0x70 && op <= 0x7f) cc = op & 0x0f;
        if (insn.field_bytes == 4 && insn.field_offset >= 2 && bytes[insn.field_offset - 2] == 0x0f &&
            op >= 0x80 && op <= 0x8f)
          cc = op & 0x0f;
        if (insn.cls == InsnClass::kJump) {
          if (!(insn.field_bytes == 1 ? op == 0xeb : op == 0xe9)) return false;
          return append_branch(to, insn.target, out);
        }
        if (cc == 0xff) return false;
        const int64_t rel = static_cast<int64_t>(insn.target - (to + 6));
        if (!fits_int32(rel)) return false;
        out->push_back(0x0f);
        out->push_back(static_cast<uint8_t>(0x80 | cc));
        append_rel32(out, rel);
        return true;
      }
      default:
        return false;
    }
  }

  DecodedInsn decode(uint64_t address, std::span<const uint8_t> bytes) const override {
    DecodedInsn out;
    out.address = address;
    auto r = disassembler().decode(address, bytes.first(std::min<size_t>(bytes.size(), 15)));
    if (!r) return out;
    out.size = static_cast<uint8_t>(r->size);
    const llvm::MCInstrDesc& d = *r->desc;
    const std::string_view name = r->name;
    if (one_of(name, {"SYSCALL", "SYSENTER", "INT", "INT1", "INTO"})) {
      out.cls = InsnClass::kSyscall;
    } else if (one_of(name, {"INT3", "UD2", "UD1Wm", "UD1Lm", "UD1Qm", "UD1Wr", "UD1Lr", "UD1Qr", "HLT"}) || d.isTrap()) {
      out.cls = InsnClass::kTrap;
    } else if (name == "ENDBR64") {
      out.cls = InsnClass::kLandingPad;
    } else if (d.isReturn()) {
      out.cls = InsnClass::kReturn;
    } else if (d.isCall()) {
      out.cls = r->branch_target ? InsnClass::kCall : InsnClass::kIndirectCall;
    } else if (d.isBranch()) {
      if (d.isIndirectBranch() || !r->branch_target) {
        out.cls = InsnClass::kIndirectJump;
      } else if (one_of(name, {"JRCXZ", "JECXZ", "JCXZ", "LOOP", "LOOPE", "LOOPNE", "XBEGIN_2", "XBEGIN_4"})) {
        // rel8 only (or a transaction's abort address): nothing to move
        // them with, but their target still counts in the sweep.
        out.cls = InsnClass::kUnknown;
      } else {
        out.cls = d.isConditionalBranch() ? InsnClass::kCondBranch : InsnClass::kJump;
      }
    } else if (r->memory_target) {
      out.cls = InsnClass::kPcRelative;
    } else {
      out.cls = InsnClass::kPlain;
      out.padding = name.starts_with("NOOP");  // nop, and the multi-byte nopw/nopl padding
    }
    if (r->branch_target) {
      out.target = *r->branch_target;
      out.has_target = true;
      // Direct branches and calls end in their rel8 or rel32.
      const bool short_form = name.size() >= 2 && name.substr(name.size() - 2) == "_1";
      out.field_bytes = short_form ? 1 : 4;
      out.field_offset = static_cast<uint8_t>(out.size - out.field_bytes);
    } else if (r->memory_target) {
      out.target = *r->memory_target;
      out.has_target = true;
      if (!find_displacement(out, bytes, r->memory_field_offset)) out.cls = InsnClass::kUnknown;
    }
    return out;
  }
};

}  // namespace

const InstructionDecoder& x86_64_decoder() {
  static const X86Decoder decoder;
  return decoder;
}

std::string x86_64_decoder_error() { return disassembler().error(); }

}  // namespace ftjit::x86_64
