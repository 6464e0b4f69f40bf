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
//                                              (encode_init; de-init
//                                              writes the compiled bytes
//                                              back, live)
//     enabled     e8 <rel32>       call trampoline     live, int3 protocol
//     hooked      e9 <rel32>       jmp stub            live, int3 protocol
//                 (an ops hooks the return: see (c))
//
//     The slot holds 8 x 0x90 until call-ops stores an ops pointer there; it
//     is never executed (it lies before the symbol), so it is plain data.
//     The site is its live instruction: no fixed part of its own
//     (live_offset 0, site_bytes 5; see backends/backend.h).
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
//     stub+0    ff 35 0a 00 00 00  push [stub+16]  ; as if the site called
//     stub+6    ff 25 0c 00 00 00  jmp  [stub+24]  ; the trampoline
//     stub+12   cc cc cc cc
//     stub+16   entry+5            the site's return address
//     stub+24   <8-byte word>      the trampoline's address: a data store
//                                  retargets the stub, no code changes
//
//     No register is touched: a caller may keep values in any register the
//     function does not write (GCC's -fipa-ra), r11 included.
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

  // The 1-byte NOPs become the one 5-byte NOP: a site is then a single
  // instruction, which the int3 protocol can change live.
  Insn encode_init() const override { return encode_nop(); }

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
    (void)stub;  // position-independent: both words are rip-relative
    constexpr uint8_t kCode[12] = {0xff, 0x35, 10, 0, 0, 0,   // push [rip+10] = [stub+16]
                                   0xff, 0x25, 12, 0, 0, 0};  // jmp  [rip+12] = [stub+24]
    static_assert(kStubReturnOffset == 6 + 10 && kStubWordOffset == 12 + 12);
    std::memcpy(out, kCode, sizeof kCode);
    std::memset(out + sizeof kCode, kInt3, kStubReturnOffset - sizeof kCode);
    const uint64_t ret = entry + kSiteBytes;
    std::memcpy(out + kStubReturnOffset, &ret, 8);
    std::memset(out + kStubWordOffset, 0, 8);
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
  Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& req) const override {
    return emitter_.emit_inline_template(req);
  }

 private:
  const TrampolineEmitter& emitter_;
  IsaTraits traits_ = [] {
    IsaTraits t;
    t.isa = Isa::kX86_64;
    t.call_bytes = kSiteBytes;
    t.slot_bytes = 8;
    t.slot_align = 8;
    t.branch_reach = int64_t{INT32_MAX} - 4096;
    t.code_align = 16;
    t.stub_use = StubUse::kHookedReturns;
    t.stub_bytes = kStubBytes;
    t.stub_word_offset = kStubWordOffset;
    t.reloc_jump_slot = 7;  // R_X86_64_JUMP_SLOT
    t.reloc_glob_dat = 6;   // R_X86_64_GLOB_DAT
    t.reloc_abs64 = 1;      // R_X86_64_64
    t.reloc_irelative = 37;  // R_X86_64_IRELATIVE
    t.live_offset = 0;
    t.site_bytes = kSiteBytes;
    t.site_flags = "-fpatchable-function-entry=5 or =13,8";
    t.slot_flags = "-fpatchable-function-entry=13,8";
    const uint8_t pad[4] = {0xf3, 0x0f, 0x1e, 0xfa};  // endbr64
    std::memcpy(t.landing_pad, pad, 4);
    t.landing_pad_bytes = 4;
    return t;
  }();
  // int3 over the first byte; the new tail; the new first byte. A thread
  // that runs into the int3 reports the pc after it.
  LiveProtocol protocol_{{WriteStep{0, 1, false, {kInt3}}, WriteStep{1, 0, true, {}},
                          WriteStep{0, 1, true, {}}},
                         3, LiveChange::kTrap, /*trap_pc_offset*/ 1};
};

}  // namespace

std::unique_ptr<Backend> make_x86_64_backend(const TrampolineEmitter& emitter) {
  return std::make_unique<X86_64Backend>(emitter);
}

}  // namespace ftjit
