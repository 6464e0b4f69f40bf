// SPDX-License-Identifier: MIT
// arm64 instructions as the relocator sees them (core/instruction_decoder.h).
// LLVM MC decodes (an invalid word is no instruction) and says which are
// branches, calls and returns, and where direct branches go; the
// PC-relative data forms LLVM leaves unevaluated (ADR, Q10) or that are
// one field of a fixed word (ADRP, LDR literal) are read from the word:
//
//   ADR   rd, label   0 immlo(2) 10000 immhi(19) rd      pc + imm21
//   ADRP  rd, label   1 immlo(2) 10000 immhi(19) rd      pc & ~0xfff + imm21 << 12
//   LDR   literal     opc(2) 011 V 00 imm19 rt            pc + imm19 * 4
//   B.cond            0101010 0 imm19 0 cond              pc + imm19 * 4
//   CBZ/CBNZ          sf 011010 op imm19 rt               pc + imm19 * 4
//   TBZ/TBNZ          b5 011011 op b40(5) imm14 rt        pc + imm14 * 4
//   B / BL            op 00101 imm26                      pc + imm26 * 4
#include "backends/arm64/arm64_decoder.h"

#include <llvm/MC/MCInstrDesc.h>

#include <cstring>
#include <mutex>

#include "backends/llvm/llvm_disassembler.h"

extern "C" void LLVMInitializeAArch64TargetInfo();
extern "C" void LLVMInitializeAArch64TargetMC();
extern "C" void LLVMInitializeAArch64Disassembler();

namespace ftjit::arm64 {
namespace {

const llvm_mc::Disassembler& disassembler() {
  static std::once_flag once;
  static const llvm_mc::Disassembler* d = nullptr;
  std::call_once(once, [] {
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64Disassembler();
    // Every extension a Debian binary may use (+all would decode SVE too).
    d = new llvm_mc::Disassembler("aarch64-unknown-linux-gnu", "generic",
                                  "+v8.5a,+lse,+rcpc,+crc,+crypto,+fp-armv8,+neon,+pauth,+bti,+mte,+sve2");
  });
  return *d;
}

int64_t sext(uint64_t v, int bits) { return static_cast<int64_t>(v << (64 - bits)) >> (64 - bits); }

bool fits(int64_t v, int bits) { return v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1)); }

void put(std::vector<uint8_t>* out, uint32_t word) {
  const auto* p = reinterpret_cast<const uint8_t*>(&word);
  out->insert(out->end(), p, p + 4);
}

// Landing pads: bti (any of c, j, jc), paciasp, pacibsp.
bool is_landing_pad(uint32_t w) {
  return (w & 0xffffff3f) == 0xd503241f || w == 0xd503233f || w == 0xd503237f;
}

// Load/store exclusive (and load-acquire/store-release) encodings.
bool is_exclusive(uint32_t w) { return (w & 0x3f000000) == 0x08000000; }

class Arm64Decoder final : public InstructionDecoder {
 public:
  Isa isa() const override { return Isa::kArm64; }
  uint32_t resync_bytes() const override { return 4; }
  uint32_t entry_branch_bytes() const override { return 4; }

  void around_sled(std::span<const uint8_t> pad, std::vector<uint8_t>* before,
                   std::vector<uint8_t>* after) const override {
    if (pad.size() != 4) return;
    uint32_t w;
    std::memcpy(&w, pad.data(), 4);
    // paciasp/autiasp (key A), pacibsp/autibsp (key B); both with sp.
    uint32_t aut = 0;
    if (w == 0xd503233f) aut = 0xd50323bf;
    if (w == 0xd503237f) aut = 0xd50323ff;
    if (aut == 0) return;
    const auto put = [](std::vector<uint8_t>* out, uint32_t word) {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&word);
      out->insert(out->end(), b, b + 4);
    };
    put(before, aut);
    put(after, w);
  }

  DecodedInsn decode(uint64_t address, std::span<const uint8_t> bytes) const override {
    DecodedInsn out;
    out.address = address;
    if (bytes.size() < 4) return out;
    uint32_t w;
    std::memcpy(&w, bytes.data(), 4);
    auto r = disassembler().decode(address, bytes.first(4));
    if (!r) return out;
    out.size = 4;
    const llvm::MCInstrDesc& d = *r->desc;
    auto target = [&](int64_t rel) {
      out.target = address + static_cast<uint64_t>(rel);
      out.has_target = true;
    };
    if ((w & 0x1f000000) == 0x10000000) {  // ADR / ADRP
      const uint64_t imm = ((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3);
      out.cls = InsnClass::kPcRelative;
      if (w & 0x80000000) {
        out.target = (address & ~uint64_t{0xfff}) + static_cast<uint64_t>(sext(imm, 21) * 4096);
        out.has_target = true;
      } else {
        target(sext(imm, 21));
      }
    } else if ((w & 0x3b000000) == 0x18000000) {  // LDR (literal), PRFM (literal)
      out.cls = InsnClass::kPcRelative;
      target(sext((w >> 5) & 0x7ffff, 19) * 4);
    } else if (w == 0xd4000001 || (w & 0xffe0001f) == 0xd4000001) {  // svc #imm
      out.cls = InsnClass::kSyscall;
    } else if (is_landing_pad(w)) {
      out.cls = InsnClass::kLandingPad;
    } else if (is_exclusive(w)) {
      out.cls = InsnClass::kExclusive;
    } else if ((w & 0xffe0001f) == 0xd4200000 || (w & 0xffff0000) == 0 || d.isTrap()) {  // brk, udf
      out.cls = InsnClass::kTrap;
    } else if (d.isReturn()) {
      out.cls = InsnClass::kReturn;
    } else if (d.isCall()) {
      out.cls = r->branch_target ? InsnClass::kCall : InsnClass::kIndirectCall;
      if (r->branch_target) target(static_cast<int64_t>(*r->branch_target - address));
    } else if (d.isBranch()) {
      if (d.isIndirectBranch() || !r->branch_target) {
        out.cls = InsnClass::kIndirectJump;
      } else {
        out.cls = d.isConditionalBranch() ? InsnClass::kCondBranch : InsnClass::kJump;
        target(static_cast<int64_t>(*r->branch_target - address));
      }
    } else {
      out.cls = InsnClass::kPlain;
      out.padding = w == 0xd503201f;  // nop
    }
    return out;
  }

  // An LDR (literal) beyond 1 MiB of the copy, through the register it
  // loads (a general one) or x16 (FP/SIMD: x16 is the intra-procedure-call
  // scratch, dead at a function's entry, where a copy always runs):
  //   ADRP xN, page(target); ADD xN, xN, #lo12(target); LDR <rt>, [xN]
  // PRFM (literal) becomes a NOP: a hint.
  bool relocate_far_literal(uint32_t w, uint64_t target, uint64_t to, std::vector<uint8_t>* out) const {
    const uint32_t opc = w >> 30, rt = w & 0x1f;
    const bool simd = (w & 0x04000000) != 0;
    if (!simd && opc == 3) {
      put(out, 0xd503201f);  // nop
      return true;
    }
    // LDR (immediate, unsigned offset 0) of the same width into rt.
    uint32_t load = 0;
    if (!simd) {
      load = opc == 0 ? 0xb9400000u : opc == 1 ? 0xf9400000u : 0xb9800000u;  // ldr w, ldr x, ldrsw
    } else {
      if (opc == 3) return false;
      load = opc == 0 ? 0xbd400000u : opc == 1 ? 0xfd400000u : 0x3dc00000u;  // ldr s, d, q
    }
    const uint32_t base = simd ? 16 : rt;
    const int64_t pages = static_cast<int64_t>((target & ~uint64_t{0xfff}) - (to & ~uint64_t{0xfff})) / 4096;
    if (!fits(pages, 21)) return false;
    const uint32_t imm = static_cast<uint32_t>(pages) & 0x1fffff;
    put(out, 0x90000000 | (imm & 3) << 29 | (imm >> 2) << 5 | base);                          // adrp
    put(out, 0x91000000 | static_cast<uint32_t>(target & 0xfff) << 10 | base << 5 | base);  // add
    put(out, load | base << 5 | rt);                                                        // ldr
    return true;
  }

  bool append_branch(uint64_t at, uint64_t target, std::vector<uint8_t>* out) const override {
    const int64_t rel = static_cast<int64_t>(target - at);
    if ((rel & 3) != 0 || !fits(rel / 4, 26)) return false;
    put(out, 0x14000000 | (static_cast<uint32_t>(rel / 4) & 0x3ffffff));  // b
    return true;
  }

  //   ADRP rd         -> ADRP rd (its page from the copy's)
  //   ADR rd          -> ADRP rd; ADD rd, rd, #lo12
  //   LDR literal     -> the same with imm19 from the copy (within 1 MiB),
  //                      else ADRP+ADD+LDR [reg] (relocate_far_literal)
  //   B               -> B
  //   B.cond / CBZ / CBNZ / TBZ / TBNZ  -> the same when the target is in
  //                      reach, else the inverted test over a B:
  //                        B.!cond / CBNZ / CBZ / TBNZ / TBZ  +8;  B target
  bool relocate(const DecodedInsn& insn, std::span<const uint8_t> bytes, uint64_t to,
                std::vector<uint8_t>* out) const override {
    if (bytes.size() < 4 || insn.size != 4) return false;
    uint32_t w;
    std::memcpy(&w, bytes.data(), 4);
    const int64_t rel = static_cast<int64_t>(insn.target - to);
    switch (insn.cls) {
      case InsnClass::kPlain:
        put(out, w);
        return true;
      case InsnClass::kPcRelative: {
        const uint32_t rd = w & 0x1f;
        if ((w & 0x1f000000) == 0x10000000) {
          const int64_t pages = static_cast<int64_t>((insn.target & ~uint64_t{0xfff}) - (to & ~uint64_t{0xfff})) / 4096;
          if (!fits(pages, 21)) return false;
          const uint32_t imm = static_cast<uint32_t>(pages) & 0x1fffff;
          put(out, 0x90000000 | (imm & 3) << 29 | (imm >> 2) << 5 | rd);  // adrp rd
          if ((w & 0x80000000) == 0)                                       // adr: + lo12
            put(out, 0x91000000 | static_cast<uint32_t>(insn.target & 0xfff) << 10 | rd << 5 | rd);
          return true;
        }
        if ((rel & 3) == 0 && fits(rel / 4, 19)) {
          put(out, (w & ~(0x7ffffu << 5)) | (static_cast<uint32_t>(rel / 4) & 0x7ffff) << 5);
          return true;
        }
        return relocate_far_literal(w, insn.target, to, out);
      }
      case InsnClass::kJump:
        if ((w & 0xfc000000) != 0x14000000) return false;  // b
        return append_branch(to, insn.target, out);
      case InsnClass::kCondBranch: {
        const bool tb = (w & 0x7e000000) == 0x36000000;
        const int bits = tb ? 14 : 19;
        const uint32_t field = tb ? 0x3fff << 5 : 0x7ffff << 5;
        if ((rel & 3) == 0 && fits(rel / 4, bits)) {
          put(out, (w & ~field) | (static_cast<uint32_t>(rel / 4) << 5 & field));
          return true;
        }
        // Inverted over a B: B.cond flips the condition's low bit, the
        // compare-and-branch forms their op bit (24).
        uint32_t inverted = (w & 0xff000010) == 0x54000000 ? w ^ 1 : w ^ (1u << 24);
        inverted = (inverted & ~field) | (2u << 5 & field);  // +8
        put(out, inverted);
        return append_branch(to + 4, insn.target, out);
      }
      default:
        return false;
    }
  }
};

}  // namespace

const InstructionDecoder& arm64_decoder() {
  static const Arm64Decoder decoder;
  return decoder;
}

std::string arm64_decoder_error() { return disassembler().error(); }

}  // namespace ftjit::arm64
