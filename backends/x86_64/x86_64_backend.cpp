// SPDX-License-Identifier: MIT
// x86-64 sites: their encodings and the int3 rewrite protocol. No asmjit:
// this file is all an agent needs of the ISA (trampolines are emitted
// elsewhere, see x86_64_emitter.cpp, possibly in another process).
//
// (a) The site, -fpatchable-function-entry=5 or =13,8 (slot only with =13,8):
//
//     record-8 ...... entry ............... entry+5
//     [ ops slot, 8B ][ 5 bytes at entry ][ body ...
//
//     state       bytes at entry              written
//     compiled    90 90 90 90 90   (GCC)      by the compiler
//                 0f 1f 44 00 xx   (clang; 16 emits xx=00, 14 xx=08)
//     disabled    0f 1f 44 00 00   nopl 0(%rax,%rax)   once, all stopped
//     enabled     e8 <rel32>       call trampoline     live, int3 protocol
//     hooked      e9 <rel32>       jmp stub            live, int3 protocol
//                 (an ops hooks the return: see (c))
//
//     The slot holds 8 x 0x90 until call-ops stores an ops pointer there; it
//     is never executed (it lies before the symbol), so it is plain data.
//
// (b) Registers at the entry (SysV): rdi rsi rdx rcx r8 r9 hold arguments,
//     al the vector-register count of a varargs call, r10 the static chain,
//     xmm0-7 FP arguments: all live. r11 and the flags are free: the call
//     into the function already clobbered them as far as the caller knows.
//     rsp = 8 mod 16 by the ABI, but not always in practice: GCC calls
//     its own static functions without realigning (-fipa-stack-alignment)
//     when the callee needs no alignment, so trampolines realign.
//
// (c) A hooked site's stub, one per site, in memory of the engine's near the
//     module (stride kStubBytes). A call into the trampoline would leave a
//     return-stack-buffer entry that no return consumes; the stub builds
//     the same stack without one, and the trampoline then calls the body
//     (x86_64_emitter.cpp, (e)):
//
//     stub+0    4c 8d 1d <rel32>   lea  r11, [rip -> entry+5]
//     stub+7    41 53              push r11        ; as if the site called
//     stub+9    ff 25 01 00 00 00  jmp  [stub+16]  ; the trampoline
//     stub+15   cc
//     stub+16   <8-byte word>      the trampoline's address: a data store
//                                  retargets the stub, no code changes
//
// Live rewrite order (each step for every site of a batch, then one sync):
//   1. write int3 (cc) over the first byte: a thread reaching the site now
//      traps, and the SIGTRAP handler emulates the new instruction;
//   2. write bytes 1..4 of the new instruction;
//   3. write its first byte.
#include "backends/x86_64/x86_64_backend.h"

#include <cstring>
#include <memory>

#include "backends/x86_64/x86_64_encoding.h"

namespace ftjit {
namespace {

using namespace x86_64;

class X86_64Backend final : public Backend {
 public:
  explicit X86_64Backend(const TrampolineEmitter& emitter) : emitter_(emitter) {}
  const IsaTraits& traits() const override { return traits_; }

  SledInfo classify_entry(uint64_t entry, std::span<const uint8_t> b) const override {
    SledInfo info;
    if (b.size() < kSiteBytes) return info;
    // Any displacement byte makes the same NOP (clang-14 emits 08).
    if (std::memcmp(b.data(), kNop5, kSiteBytes - 1) == 0) {
      info.kind = SledKind::kNop;
    } else if (b[0] == kCallRel32) {
      int32_t rel;
      std::memcpy(&rel, b.data() + 1, 4);
      info.kind = SledKind::kCall;
      info.call_target = entry + kSiteBytes + int64_t{rel};
    } else {
      bool all_nops = true;
      for (uint32_t i = 0; i < kSiteBytes; ++i) all_nops &= b[i] == kOneByteNop;
      if (all_nops) info.kind = SledKind::kNopSled;
    }
    return info;
  }

  Insn encode_nop() const override {
    Insn insn;
    std::memcpy(insn.bytes, kNop5, kSiteBytes);
    insn.size = kSiteBytes;
    return insn;
  }

  bool encode_call(uint64_t entry, uint64_t target, Insn* out) const override {
    // Encoded by hand rather than with asmjit: attach encodes one per site,
    // up to millions per batch. tests/golden checks it against asmjit.
    int64_t rel = static_cast<int64_t>(target - (entry + kSiteBytes));
    if (!fits_rel32(rel)) return false;
    // Assembled in one register and stored once: byte-wise stores into the
    // returned value stalled store forwarding at a million sites a batch.
    uint64_t word = kCallRel32 | (uint64_t{static_cast<uint32_t>(static_cast<int32_t>(rel))} << 8);
    std::memcpy(out->bytes, &word, sizeof word);
    out->size = kSiteBytes;
    return true;
  }

  bool encode_jump(uint64_t entry, uint64_t target, Insn* out) const override {
    if (!encode_call(entry, target, out)) return false;
    out->bytes[0] = kJmpRel32;
    return true;
  }

  bool encode_stub(uint64_t stub, uint64_t entry, uint8_t* out) const override {
    constexpr uint8_t kStub[kStubWordOffset] = {0x4c, 0x8d, 0x1d, 0, 0, 0, 0,  // lea r11, [rip+rel]
                                                0x41, 0x53,                    // push r11
                                                0xff, 0x25, 0x01, 0, 0, 0,     // jmp [rip+1]
                                                kInt3};
    static_assert(kStubWordOffset == 15 + 1);  // jmp's next insn + 1
    const int64_t rel = static_cast<int64_t>(entry + kSiteBytes - (stub + 7));
    if (!fits_rel32(rel)) return false;
    std::memcpy(out, kStub, sizeof kStub);
    const int32_t rel32 = static_cast<int32_t>(rel);
    std::memcpy(out + 3, &rel32, 4);
    std::memset(out + kStubWordOffset, 0, kStubBytes - kStubWordOffset);
    return true;
  }

  const LiveProtocol& live_protocol() const override { return protocol_; }

  TrapFixup emulate(uint64_t entry, const Insn& to) const override {
    TrapFixup fix;
    if (to.bytes[0] == kCallRel32 || to.bytes[0] == kJmpRel32) {
      int32_t rel;
      std::memcpy(&rel, to.bytes + 1, 4);
      fix.pc = entry + kSiteBytes + int64_t{rel};
      fix.push = to.bytes[0] == kCallRel32;
      fix.push_value = fix.push ? entry + kSiteBytes : 0;
    } else {
      fix.pc = entry + to.size;
    }
    return fix;
  }

  // Emission is the emitter's: asmjit here, or a generator in another
  // process for an agent.
  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest& req,
                                               uint64_t place) const override {
    return emitter_.emit_trampoline(req, place);
  }
  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest& req,
                                                    uint64_t place) const override {
    return emitter_.emit_exit_trampoline(req, place);
  }

 private:
  const TrampolineEmitter& emitter_;
  IsaTraits traits_{Isa::kX86_64, kSiteBytes, 8, 8, int64_t{INT32_MAX} - 4096, 16,
                    kStubBytes, kStubWordOffset,
                    /*R_X86_64_JUMP_SLOT*/ 7, /*R_X86_64_GLOB_DAT*/ 6,
                    /*R_X86_64_64*/ 1};
  // int3 over the first byte; the new tail; the new first byte.
  LiveProtocol protocol_{{WriteStep{0, 1, false, {kInt3}}, WriteStep{1, 0, true, {}},
                          WriteStep{0, 1, true, {}}},
                         3};
};

}  // namespace

std::unique_ptr<Backend> make_x86_64_backend(const TrampolineEmitter& emitter) {
  return std::make_unique<X86_64Backend>(emitter);
}

}  // namespace ftjit
