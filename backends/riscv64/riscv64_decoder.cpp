// SPDX-License-Identifier: MIT
// riscv64 instructions as the relocator sees them (core/instruction_decoder.h).
// LLVM MC decodes (bytes it does not know are no instruction) and says
// which registers an instruction writes; where control goes and what a
// pc-relative form computes is one field of a fixed layout, read from the
// word (the halfword of a compressed form), as RISC-V draws them, and
// checked against LLVM's evaluateBranch where it has one:
//
//   U   auipc rd       imm[31:12]                    rd        0010111   pc + sext(imm << 12)
//   J   jal rd         imm[20|10:1|11|19:12]         rd        1101111   pc + imm21
//   I   jalr rd        imm[11:0]       rs1  000      rd        1100111   rs1 + imm12
//   B   beq..bgeu      imm[12|10:5] rs2 rs1 funct3   imm[4:1|11] 1100011 pc + imm13
//   CB  c.beqz/c.bnez  11f imm[8|4:3] rs1' imm[7:6|2:1|5] 01             pc + imm9 (rs1' = x8..x15)
//   CJ  c.j            101 imm[11|4|9:8|10|6|7|3:1|5] 01                 pc + imm12
//   CR  c.jr/c.jalr    100 f rs1 00000 10     (f = 0: jr, 1: jalr)
//
// An auipc is half of a pair whose other half (addi, a load or store, a
// jalr) adds the low 12 bits: for the sweep (no branch may land inside an
// entry's overwritten bytes) its target is the address the pair means, when
// the pair is the next instruction; alone, its own value.
//
// Moved to a copy at `to` (up to 2 GiB away), 4 bytes a word:
//
//   auipc rd, X      ->  auipc rd, hi(v - to); addi rd, rd, lo(v - to)
//                        v: the value the auipc gave at its own address, so
//                        whatever instruction pairs with it (moved or not)
//                        reads the same rd.
//   Bcc rs1, rs2     ->  Bcc rs1, rs2 (copy's offset) within +-4 KiB, else
//   c.beqz/c.bnez rs     B!cc rs1, rs2, +8|+12 ; <jump>  (c.beqz rs: beq rs, x0)
//   jal x0 / c.j     ->  <jump>
//   <jump>           =   jal x0, target within +-1 MiB, else
//                        auipc t0, hi(d); jalr x0, lo(d)(t0)   (+-2 GiB)
//   jalr x0 (ret, jr) and plain instructions: their bytes.
//   hi(d) = (d + 0x800) >> 12, lo(d) = d - (hi(d) << 12) in [-2048, 2047]:
//   addi and jalr sign-extend their 12 bits, so the upper part rounds.
//
// The entry's branch to its stub is the same <jump>: 4 bytes when the stub
// is within jal's +-1 MiB (branch_bytes), 8 when not (entry_branch_bytes,
// what the planner plans for).
//
// Why t0 for a far jump: it needs a register, and t0 is the sled's own (the
// sled's auipc wrote it before the tracer ran: riscv64_backend.h), dead at
// every entry ftjit traces. But an instruction moved into the copy that
// writes t0 (li t0, ...; ld t0, ...) leaves a value the function's body may
// read after the copy's jump back replaced it: such an instruction is
// kUnknown (the planner refuses it), and so is auipc t0.
#include "backends/riscv64/riscv64_decoder.h"

#include <llvm/MC/MCInst.h>
#include <llvm/MC/MCInstrDesc.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/TargetRegistry.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>

#include "backends/llvm/llvm_disassembler.h"

extern "C" void LLVMInitializeRISCVTargetInfo();
extern "C" void LLVMInitializeRISCVTargetMC();
extern "C" void LLVMInitializeRISCVDisassembler();

namespace ftjit::riscv64 {
namespace {

constexpr char kTriple[] = "riscv64-unknown-linux-gnu";

struct Tables {
  const llvm_mc::Disassembler* disassembler = nullptr;
  unsigned t0 = 0;  // LLVM's number of x5 (0: none found, nothing is t0)
};

const Tables& tables() {
  static std::once_flag once;
  static Tables t;
  std::call_once(once, [] {
    LLVMInitializeRISCVTargetInfo();
    LLVMInitializeRISCVTargetMC();
    LLVMInitializeRISCVDisassembler();
    // rv64gc and what a Debian binary may use beyond it (LLVM 16's names;
    // it warns about, and ignores, names it does not know, e.g. zicsr).
    t.disassembler = new llvm_mc::Disassembler(
        kTriple, "generic-rv64",
        "+m,+a,+f,+d,+c,+zba,+zbb,+zbc,+zbs,+zbkb,+zicbom,+zicboz,+zicbop,+zihintpause,+zfh,+v");
    // x5's number in LLVM's register tables, by name (the enum is LLVM's
    // private header): what "writes t0" compares with.
    std::string err;
    if (const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, err)) {
      std::unique_ptr<llvm::MCRegisterInfo> regs(target->createMCRegInfo(kTriple));
      for (unsigned r = 1; regs && r < regs->getNumRegs(); ++r)
        if (std::string_view(regs->getName(r)) == "X5") t.t0 = r;
    }
  });
  return t;
}

constexpr uint32_t kT0 = 5, kRa = 1;

int64_t sext(uint64_t v, int bits) { return static_cast<int64_t>(v << (64 - bits)) >> (64 - bits); }
bool fits(int64_t v, int bits) { return v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1)); }
uint32_t bit(uint32_t w, int at) { return (w >> at) & 1; }
uint32_t bits(uint32_t w, int hi, int lo) { return (w >> lo) & ((1u << (hi - lo + 1)) - 1); }

void put(std::vector<uint8_t>* out, uint32_t word) {
  const uint8_t b[4] = {static_cast<uint8_t>(word), static_cast<uint8_t>(word >> 8), static_cast<uint8_t>(word >> 16),
                        static_cast<uint8_t>(word >> 24)};
  out->insert(out->end(), b, b + 4);
}

// ---- Fields read from a word or halfword.

uint32_t rd_of(uint32_t w) { return bits(w, 11, 7); }
uint32_t rs1_of(uint32_t w) { return bits(w, 19, 15); }
uint32_t rs2_of(uint32_t w) { return bits(w, 24, 20); }
uint32_t funct3_of(uint32_t w) { return bits(w, 14, 12); }
int64_t i_imm(uint32_t w) { return sext(w >> 20, 12); }
int64_t s_imm(uint32_t w) { return sext(bits(w, 31, 25) << 5 | bits(w, 11, 7), 12); }
int64_t u_imm(uint32_t w) { return static_cast<int32_t>(w & 0xfffff000u); }  // sign-extended from bit 31
int64_t b_imm(uint32_t w) {
  return sext(bit(w, 31) << 12 | bit(w, 7) << 11 | bits(w, 30, 25) << 5 | bits(w, 11, 8) << 1, 13);
}
int64_t j_imm(uint32_t w) {
  return sext(bit(w, 31) << 20 | bits(w, 19, 12) << 12 | bit(w, 20) << 11 | bits(w, 30, 21) << 1, 21);
}
// CB: 11f imm[8|4:3] rs1' imm[7:6|2:1|5] 01.
int64_t cb_imm(uint32_t h) {
  return sext(bit(h, 12) << 8 | bits(h, 11, 10) << 3 | bits(h, 6, 5) << 6 | bits(h, 4, 3) << 1 | bit(h, 2) << 5, 9);
}
// CJ: 101 imm[11|4|9:8|10|6|7|3:1|5] 01.
int64_t cj_imm(uint32_t h) {
  return sext(bit(h, 12) << 11 | bit(h, 11) << 4 | bits(h, 10, 9) << 8 | bit(h, 8) << 10 | bit(h, 7) << 6 |
                  bit(h, 6) << 7 | bits(h, 5, 3) << 1 | bit(h, 2) << 5,
              12);
}

// ---- Words written (each field masked to its width).

constexpr uint32_t kOpAuipc = 0x17, kOpJal = 0x6f, kOpJalr = 0x67, kOpBranch = 0x63, kOpImm = 0x13;

uint32_t i_type(uint32_t opcode, uint32_t rd, uint32_t funct3, uint32_t rs1, int64_t imm) {
  return (static_cast<uint32_t>(imm) & 0xfff) << 20 | rs1 << 15 | funct3 << 12 | rd << 7 | opcode;
}
uint32_t u_type(uint32_t opcode, uint32_t rd, int64_t imm20) {
  return (static_cast<uint32_t>(imm20) & 0xfffff) << 12 | rd << 7 | opcode;
}
uint32_t b_type(uint32_t funct3, uint32_t rs1, uint32_t rs2, int64_t off) {
  const uint32_t o = static_cast<uint32_t>(off);
  return bit(o, 12) << 31 | bits(o, 10, 5) << 25 | rs2 << 20 | rs1 << 15 | funct3 << 12 | bits(o, 4, 1) << 8 |
         bit(o, 11) << 7 | kOpBranch;
}
uint32_t j_type(uint32_t rd, int64_t off) {
  const uint32_t o = static_cast<uint32_t>(off);
  return bit(o, 20) << 31 | bits(o, 10, 1) << 21 | bit(o, 11) << 20 | bits(o, 19, 12) << 12 | rd << 7 | kOpJal;
}

// d split for auipc (upper, rounded) + a 12-bit signed add; false beyond
// auipc's reach (about +-2 GiB).
bool split_hi_lo(int64_t d, int64_t* hi, int64_t* lo) {
  *hi = (d + 0x800) >> 12;
  *lo = d - (*hi << 12);
  return fits(*hi, 20);
}

// The instruction after an auipc rd that completes its pair: addi, a load
// or store (integer or float), jalr, with rs1 == rd. Its low 12 bits.
bool pair_lo12(uint32_t next, uint32_t rd, int64_t* lo) {
  if ((next & 3) != 3 || rs1_of(next) != rd) return false;
  const uint32_t op = next & 0x7f, f3 = funct3_of(next);
  switch (op) {
    case kOpImm:   // addi
    case 0x1b:     // addiw
      if (f3 != 0) return false;
      *lo = i_imm(next);
      return true;
    case 0x03:  // lb lh lw ld lbu lhu lwu
      if (f3 == 7) return false;
      *lo = i_imm(next);
      return true;
    case 0x07:  // flh flw fld flq (the other widths are vector loads)
      if (f3 < 1 || f3 > 4) return false;
      *lo = i_imm(next);
      return true;
    case 0x23:  // sb sh sw sd
      if (f3 > 3) return false;
      *lo = s_imm(next);
      return true;
    case 0x27:  // fsh fsw fsd fsq
      if (f3 < 1 || f3 > 4) return false;
      *lo = s_imm(next);
      return true;
    case kOpJalr:
      if (f3 != 0) return false;
      *lo = i_imm(next);
      return true;
    default:
      return false;
  }
}

class Riscv64Decoder final : public InstructionDecoder {
 public:
  Isa isa() const override { return Isa::kRiscv64; }
  uint32_t resync_bytes() const override { return 2; }
  // The farthest stub: auipc t0 + jalr (a jal when one is in reach:
  // branch_bytes).
  uint32_t entry_branch_bytes() const override { return 8; }

  uint32_t branch_bytes(uint64_t from, uint64_t to) const override {
    const int64_t d = static_cast<int64_t>(to - from);
    return (d & 1) == 0 && fits(d, 21) ? 4 : 8;
  }

  DecodedInsn decode(uint64_t address, std::span<const uint8_t> bytes) const override {
    DecodedInsn out;
    out.address = address;
    if (bytes.size() < 2) return out;
    const uint32_t h = bytes[0] | uint32_t{bytes[1]} << 8;
    if (h == 0) {  // c.unimp: all-zero bytes are defined illegal
      out.size = 2;
      out.cls = InsnClass::kTrap;
      return out;
    }
    const Tables& t = tables();
    llvm::MCInst inst;
    const auto r = t.disassembler->decode(address, bytes.first(std::min<size_t>(bytes.size(), 4)), &inst);
    if (!r || (r->size != 2 && r->size != 4)) return out;
    out.size = static_cast<uint8_t>(r->size);
    auto target = [&](int64_t rel) {
      out.target = address + static_cast<uint64_t>(rel);
      out.has_target = true;
    };
    out.cls = InsnClass::kPlain;
    out.padding = r->size == 2 ? h == 0x0001 : (h | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24) == 0x00000013;
    if (r->size == 2) {
      const uint32_t quadrant = h & 3, f3 = h >> 13;
      if (quadrant == 1 && f3 == 5) {  // c.j
        out.cls = InsnClass::kJump;
        target(cj_imm(h));
      } else if (quadrant == 1 && f3 >= 6) {  // c.beqz, c.bnez
        out.cls = InsnClass::kCondBranch;
        target(cb_imm(h));
      } else if (quadrant == 2 && f3 == 4 && bits(h, 6, 2) == 0) {  // c.jr, c.jalr, c.ebreak
        const uint32_t rs1 = bits(h, 11, 7);
        if (bit(h, 12) == 0)
          out.cls = rs1 == kRa ? InsnClass::kReturn : InsnClass::kIndirectJump;
        else
          out.cls = rs1 == 0 ? InsnClass::kTrap : InsnClass::kIndirectCall;
      }
    } else {
      uint32_t w;
      std::memcpy(&w, bytes.data(), 4);
      const uint32_t op = w & 0x7f, rd = rd_of(w);
      if (op == kOpAuipc) {
        if (rd != 0) {
          out.cls = rd == kT0 ? InsnClass::kUnknown : InsnClass::kPcRelative;
          int64_t rel = u_imm(w), lo = 0;
          if (bytes.size() >= 8) {
            uint32_t next;
            std::memcpy(&next, bytes.data() + 4, 4);
            if (pair_lo12(next, rd, &lo)) rel += lo;
          }
          target(rel);
        }
      } else if (op == kOpJal) {
        out.cls = rd == 0 ? InsnClass::kJump : InsnClass::kCall;
        target(j_imm(w));
      } else if (op == kOpJalr) {
        if (rd != 0)
          out.cls = InsnClass::kIndirectCall;
        else
          out.cls = rs1_of(w) == kRa && i_imm(w) == 0 ? InsnClass::kReturn : InsnClass::kIndirectJump;
      } else if (op == kOpBranch) {
        out.cls = InsnClass::kCondBranch;
        target(b_imm(w));
      } else if (w == 0x00000073) {
        out.cls = InsnClass::kSyscall;  // ecall
      } else if (w == 0x00100073 || w == 0xc0001073) {
        out.cls = InsnClass::kTrap;  // ebreak, unimp (csrrw x0, cycle, x0)
      } else if (op == 0x2f && (w >> 27 == 2 || w >> 27 == 3)) {
        out.cls = InsnClass::kExclusive;  // lr.w/d, sc.w/d
      }
    }
    // LLVM's evaluateBranch as a second reading of a direct branch's field
    // (it agrees on every one of Debian's libc, compressed forms included):
    // where the two differ, the instruction is not one to move.
    if (out.has_target && r->branch_target && *r->branch_target != out.target &&
        (out.cls == InsnClass::kJump || out.cls == InsnClass::kCall || out.cls == InsnClass::kCondBranch))
      out.cls = InsnClass::kUnknown;
    if (out.cls == InsnClass::kPlain && t.t0 != 0) {
      // Writes t0: the copy's scratch (above).
      const llvm::MCInstrDesc& d = *r->desc;
      for (unsigned i = 0; i < d.getNumDefs() && i < inst.getNumOperands(); ++i)
        if (inst.getOperand(i).isReg() && inst.getOperand(i).getReg() == t.t0) out.cls = InsnClass::kUnknown;
      for (const auto reg : d.implicit_defs())
        if (reg == t.t0) out.cls = InsnClass::kUnknown;
    }
    return out;
  }

  bool append_branch(uint64_t at, uint64_t target, std::vector<uint8_t>* out) const override {
    const int64_t d = static_cast<int64_t>(target - at);
    if ((d & 1) != 0) return false;
    if (fits(d, 21)) {
      put(out, j_type(0, d));  // jal x0, target
      return true;
    }
    int64_t hi, lo;
    if (!split_hi_lo(d, &hi, &lo)) return false;
    put(out, u_type(kOpAuipc, kT0, hi));          // auipc t0, hi
    put(out, i_type(kOpJalr, 0, 0, kT0, lo));     // jalr x0, lo(t0)
    return true;
  }

  bool relocate(const DecodedInsn& insn, std::span<const uint8_t> bytes, uint64_t to,
                std::vector<uint8_t>* out) const override {
    if (insn.size != 2 && insn.size != 4) return false;
    if (bytes.size() < insn.size) return false;
    uint32_t w = bytes[0] | uint32_t{bytes[1]} << 8;
    if (insn.size == 4) w |= uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
    const uint64_t from = insn.address;
    switch (insn.cls) {
      case InsnClass::kPlain:
      case InsnClass::kReturn:
      case InsnClass::kIndirectJump:
        out->insert(out->end(), bytes.begin(), bytes.begin() + insn.size);
        return true;
      case InsnClass::kPcRelative: {
        if (insn.size != 4 || (w & 0x7f) != kOpAuipc || rd_of(w) == 0 || rd_of(w) == kT0) return false;
        // The register's value, not insn.target (the pair's address).
        const uint64_t v = from + static_cast<uint64_t>(u_imm(w));
        int64_t hi, lo;
        if (!split_hi_lo(static_cast<int64_t>(v - to), &hi, &lo)) return false;
        put(out, u_type(kOpAuipc, rd_of(w), hi));          // auipc rd, hi
        put(out, i_type(kOpImm, rd_of(w), 0, rd_of(w), lo));  // addi rd, rd, lo
        return true;
      }
      case InsnClass::kJump: {
        int64_t rel;
        if (insn.size == 2 && (w & 3) == 1 && w >> 13 == 5)
          rel = cj_imm(w);
        else if (insn.size == 4 && (w & 0x7f) == kOpJal && rd_of(w) == 0)
          rel = j_imm(w);
        else
          return false;
        return append_branch(to, from + static_cast<uint64_t>(rel), out);
      }
      case InsnClass::kCondBranch: {
        uint32_t funct3, rs1, rs2;
        int64_t rel;
        if (insn.size == 2 && (w & 3) == 1 && w >> 13 >= 6) {
          funct3 = w >> 13 == 6 ? 0 : 1;  // c.beqz: beq rs, x0; c.bnez: bne rs, x0
          rs1 = 8 + bits(w, 9, 7);
          rs2 = 0;
          rel = cb_imm(w);
        } else if (insn.size == 4 && (w & 0x7f) == kOpBranch && funct3_of(w) != 2 && funct3_of(w) != 3) {
          funct3 = funct3_of(w);
          rs1 = rs1_of(w);
          rs2 = rs2_of(w);
          rel = b_imm(w);
        } else {
          return false;
        }
        const uint64_t target = from + static_cast<uint64_t>(rel);
        const int64_t d = static_cast<int64_t>(target - to);
        if (fits(d, 13)) {
          put(out, b_type(funct3, rs1, rs2, d));
          return true;
        }
        // The inverted test (beq/bne, blt/bge, bltu/bgeu differ in funct3's
        // low bit) over the jump.
        const uint32_t skip = 4 + branch_bytes(to + 4, target);
        put(out, b_type(funct3 ^ 1, rs1, rs2, skip));
        return append_branch(to + 4, target, out);
      }
      default:
        return false;
    }
  }
};

}  // namespace

const InstructionDecoder& riscv64_decoder() {
  static const Riscv64Decoder decoder;
  return decoder;
}

std::string riscv64_decoder_error() { return tables().disassembler->error(); }

}  // namespace ftjit::riscv64
