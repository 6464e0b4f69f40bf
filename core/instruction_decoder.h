// SPDX-License-Identifier: MIT
// The seam between relocation planning (core/relocation_plan.h, ISA-neutral)
// and an ISA's instruction decoder (backends/<isa>/<isa>_decoder.cpp;
// backends/backend.h's decoder_for): what one instruction is, as far as
// moving it to another address is concerned.
//
// A function without a sled is traced by overwriting its first bytes with
// one branch to a stub, which runs the instructions that were there from
// their new address and branches back:
//
//   entry  [ pad ][ insn 1 | insn 2 ...  ][ body ...
//                 `-- overwritten: one branch to the stub, leftover bytes
//                     filled with traps --'
//
// The planner needs to know, of every instruction of a module's code,
// where direct branches and PC-relative references point (no branch may
// land inside the overwritten bytes), and of the first instructions of a
// function, which of them can run from another address. That is all a
// decoder says; what it says comes from LLVM MC's disassembler, not from
// tables of our own.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/site.h"

namespace ftjit {

enum class InsnClass : uint8_t {
  kPlain,           // runs the same from any address
  kPcRelative,      // reads or computes an address relative to the pc (x86
                    // RIP-relative operand, arm64 ADR/ADRP/LDR literal,
                    // riscv64 AUIPC): `target` is that address
  kCondBranch,      // conditional direct branch to `target`
  kJump,            // unconditional direct branch to `target`
  kCall,            // direct call of `target`
  kIndirectCall,    // call through a register or memory
  kReturn,
  kIndirectJump,    // branch through a register or memory (a tail call)
  kSyscall,         // enters the kernel (a thread may block right after it)
  kExclusive,       // part of a load-exclusive/store-exclusive or LR/SC pair
  kLandingPad,      // a landing pad at the entry (endbr64, bti c, paciasp):
                    // kept in place, the branch is written after it
  kTrap,            // a breakpoint or undefined instruction (ud2, brk)
  kUnknown,         // decoded, but not one the relocator can move (or
                    // whose pc use the decoder cannot tell)
  kInvalid,         // no instruction at all
};

const char* insn_class_name(InsnClass c);

struct DecodedInsn {
  uint64_t address = 0;
  uint8_t size = 0;  // 0 with kInvalid
  InsnClass cls = InsnClass::kInvalid;
  // Where a direct branch, call or PC-relative reference points
  // (kPcRelative, kCondBranch, kJump, kCall); 0 when not known.
  uint64_t target = 0;
  bool has_target = false;
  // Where in the instruction the field that holds the pc-relative
  // distance sits, and its size (x86: a disp32 before any immediate, a
  // branch's rel8/rel32): what the relocator rewrites. 0 when none.
  uint8_t field_offset = 0;
  uint8_t field_bytes = 0;
  // A no-op (alignment padding between functions: the flow passes through
  // it, so what came before decides whether a function's entry is reached
  // by falling into it).
  bool padding = false;
};

class InstructionDecoder {
 public:
  virtual ~InstructionDecoder() = default;

  virtual Isa isa() const = 0;

  // Decodes the instruction at `address`, whose bytes start `bytes`
  // (as many as are readable, at most 16 needed). Never fails: an
  // undecodable instruction is kInvalid with size 0.
  virtual DecodedInsn decode(uint64_t address, std::span<const uint8_t> bytes) const = 0;

  // The step to the next candidate instruction after a kInvalid one (x86:
  // 1 byte; arm64: 4; riscv64: 2).
  virtual uint32_t resync_bytes() const = 0;

  // The instruction `insn` (its bytes: `bytes`) rewritten to do the same
  // at address `to`, appended to *out: a pc-relative field recomputed, a
  // short branch made long. false where it cannot (out of reach, or a
  // class the planner never moves).
  virtual bool relocate(const DecodedInsn& insn, std::span<const uint8_t> bytes, uint64_t to,
                        std::vector<uint8_t>* out) const = 0;

  // An unconditional branch at `at` to `target` appended to *out (a copy's
  // way back into its function); false if out of reach.
  virtual bool append_branch(uint64_t at, uint64_t target, std::vector<uint8_t>* out) const = 0;

  // The bytes the branch to a stub overwrites at a function's entry (after
  // its landing pad): x86-64 5 (jmp rel32), arm64 4 (b), riscv64 4 (jal;
  // 8 for auipc+jalr when no stub is within jal's reach).
  virtual uint32_t entry_branch_bytes() const = 0;

  // The bytes append_branch writes for a branch from `from` to `to`
  // (riscv64: 4 for a jal within +-1 MiB, else 8 for auipc+jalr): what a
  // function's entry loses when its stub is at `to`. At most
  // entry_branch_bytes(), which plans for the farthest stub.
  virtual uint32_t branch_bytes(uint64_t from, uint64_t to) const {
    (void)from;
    (void)to;
    return entry_branch_bytes();
  }

  // What a stub runs around its sled when the function's entry keeps the
  // landing pad `pad` in place (its bytes), appended to *before and
  // *after: the tracer must see the machine as at a sled, which comes
  // before the pad's effect. arm64: a paciasp pad has signed the return
  // address by the time the stub runs; an exit hook replaces it, so the
  // stub authenticates it first (autiasp: the tracer sees it plain) and
  // signs whatever it then is (paciasp: the function's autiasp checks it).
  // Nothing by default.
  virtual void around_sled(std::span<const uint8_t> pad, std::vector<uint8_t>* before,
                           std::vector<uint8_t>* after) const {
    (void)pad;
    (void)before;
    (void)after;
  }
};

}  // namespace ftjit
