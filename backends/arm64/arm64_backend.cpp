// SPDX-License-Identifier: MIT
// arm64 sites: their encodings and their one-word live change. No asmjit:
// this file is all an agent needs of the ISA (trampolines are emitted in
// arm64_emitter.cpp, possibly in another process).
//
// (a) The site, -fpatchable-function-entry=4,2 with -falign-functions=8
//     (literal, for call-ops) or =2 (no literal: list and generated):
//
//     record+0   literal+0  [ ops literal, 8 B, 8-aligned ]   (=4,2 only)
//     record+8   start+0    mov x9, x30          once, all stopped
//                start+4    nop <-> bl tramp     live, one aligned word
//                start+8    body ...
//
//     With a landing pad (-mbranch-protection), the compiler puts it at the
//     symbol and the NOPs after it, so the start moves by 4 and the pad
//     stays first (find_arm64_sled):
//
//     sym-8      literal (=4,2; record = sym-8)   |  (=2: record = sym+4)
//     sym+0      bti c / paciasp
//     sym+4      start: mov x9, x30
//     sym+8      nop <-> bl tramp
//
//     state       start+0        start+4        written
//     compiled    nop            nop            by the compiler
//     disabled    mov x9, x30    nop            init, all threads stopped
//     enabled     mov x9, x30    bl tramp       live: one 4-byte store
//
//     The literal holds two nops until call-ops stores an ops pointer there
//     (one aligned 8-byte store); it lies before the symbol and is never
//     executed. The mov is not live-patched: a thread may have executed the
//     first nop and not yet the second, and nop <-> mov is not among the
//     instructions the architecture lets one core rewrite while another
//     executes them (the ARM ARM's concurrent modification and execution
//     rules name B, BL, NOP and a few hint instructions, not ORR); seed
//     004 keeps it once written.
//
// (b) Registers at the live word (AAPCS64): x0-x7 arguments, x8 indirect
//     result, v0-v7 FP/SIMD arguments: live. x18 is the platform register:
//     never written. x9 holds the parent's return address (the mov),
//     x30 = start+8 once the bl ran. x16/x17 (IP0/IP1) may be clobbered by
//     any call through a linker veneer, so no caller keeps values in them:
//     the trampolines' first scratch. sp is 16-aligned at every call
//     (AAPCS64, and the hardware checks it).
//
// Live change: one aligned 4-byte store of the live word (nop <-> bl,
// bl <-> bl), then the runtime's instruction-cache maintenance and sync.
// No trap protocol: a thread sees the old word or the new one.
#include "backends/arm64/arm64_backend.h"

#include <cstring>
#include <memory>

#include "backends/arm64/arm64_encoding.h"

namespace ftjit {
namespace {

using namespace arm64;

uint32_t read_word(std::span<const uint8_t> bytes, size_t offset) {
  uint32_t word;
  std::memcpy(&word, bytes.data() + offset, sizeof word);
  return word;
}

Insn insn_of(uint32_t word) {
  Insn insn;
  std::memcpy(insn.bytes, &word, sizeof word);
  insn.size = kInsnBytes;
  return insn;
}

class Arm64Backend final : public Backend {
 public:
  explicit Arm64Backend(const TrampolineEmitter& emitter) : emitter_(emitter) {}
  const IsaTraits& traits() const override { return traits_; }

  // `entry`: the site start, or the symbol when a landing pad precedes the
  // sled; `b`: at least 8 bytes from there (12 with a pad).
  SledInfo classify_entry(uint64_t entry, std::span<const uint8_t> b) const override {
    SledInfo info;
    if (b.size() >= kInsnBytes && is_landing_pad(read_word(b, 0))) {
      entry += kInsnBytes;
      b = b.subspan(kInsnBytes);
    }
    if (b.size() < kSiteBytes) return info;
    const uint32_t first = read_word(b, 0);
    const uint32_t live = read_word(b, kLiveOffset);
    if (first == kNop && live == kNop) {
      info.kind = SledKind::kNopSled;
    } else if (first == kMovX9X30 && live == kNop) {
      info.kind = SledKind::kNop;
    } else if (first == kMovX9X30 && (live & kBranchOpcodeMask) == kBlOpcode) {
      info.kind = SledKind::kCall;
      info.call_target = branch_target(live, entry + kLiveOffset);
    }
    return info;
  }

  // The fixed part written (mov x9, x30), the live word disabled (nop).
  Insn encode_init() const override {
    Insn insn;
    const uint32_t words[2] = {kMovX9X30, kNop};
    static_assert(sizeof words == kSiteBytes && kLiveOffset == 4);
    std::memcpy(insn.bytes, words, sizeof words);
    insn.size = kSiteBytes;
    return insn;
  }

  Insn encode_nop() const override { return insn_of(kNop); }

  // `entry` here is the live word's address (site start + live_offset):
  // the branch is relative to the word that holds it. false beyond the
  // +-128 MiB of imm26, or for a misaligned target: never a wrong branch.
  bool encode_call(uint64_t entry, uint64_t target, Insn* out) const override {
    if (!branch_reaches(entry, target)) return false;
    *out = insn_of(encode_branch(kBlOpcode, entry, target));
    return true;
  }

  bool encode_jump(uint64_t entry, uint64_t target, Insn* out) const override {
    if (!branch_reaches(entry, target)) return false;
    *out = insn_of(encode_branch(kBOpcode, entry, target));
    return true;
  }

  // x86's stub makes a jumped-to trampoline look called, so that it can
  // call the body and keep the return-stack buffer balanced for hooked
  // returns. On arm64 the site's `bl` writes no stack and the trampoline
  // returns with `ret x9`, a predicted return; hooked returns are handled
  // by the landing alone (arm64_emitter.cpp). No stub: sites are never
  // entered by a jump, and traits().stub_bytes is 0.
  bool encode_stub(uint64_t, uint64_t, uint8_t*) const override { return false; }

  const LiveProtocol& live_protocol() const override { return protocol_; }

  // A single-word change needs no trap, so no thread ever traps at a site
  // in the middle of one (live_protocol writes no breakpoint). There is
  // nothing to emulate; pc 0 says so. (Emulating `bl` would need x30 set,
  // which TrapFixup, modelled on x86's pushed return address, cannot say.)
  TrapFixup emulate(uint64_t, const Insn&) const override { return TrapFixup{}; }

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
  // branch_reach keeps 4 KiB of margin below imm26's reach, as x86-64
  // does below rel32's: a trampoline placed at the edge must not end
  // beyond it.
  IsaTraits traits_ = [] {
    IsaTraits t;
    t.isa = Isa::kArm64;
    t.call_bytes = kInsnBytes;
    t.slot_bytes = kLiteralBytes;
    t.slot_align = 8;
    t.branch_reach = (int64_t{1} << 27) - 4096;
    t.code_align = 16;
    t.stub_bytes = 0;
    t.stub_word_offset = 0;
    t.reloc_jump_slot = 1026;  // R_AARCH64_JUMP_SLOT
    t.reloc_glob_dat = 1025;   // R_AARCH64_GLOB_DAT
    t.reloc_abs64 = 257;       // R_AARCH64_ABS64
    t.reloc_irelative = 1032;  // R_AARCH64_IRELATIVE
    t.live_offset = kLiveOffset;
    t.site_bytes = kSiteBytes;
    t.site_flags = "-fpatchable-function-entry=2 or =4,2 -falign-functions=8";
    t.slot_flags = "-fpatchable-function-entry=4,2 -falign-functions=8";
    const uint8_t pad[4] = {0x5f, 0x24, 0x03, 0xd5};  // bti c
    std::memcpy(t.landing_pad, pad, 4);
    t.landing_pad_bytes = 4;
    return t;
  }();
  // The new word, whole, in one store.
  LiveProtocol protocol_{{WriteStep{0, 0, true, {}}}, 1, LiveChange::kAlignedStore};
};

}  // namespace

Arm64SledStart find_arm64_sled(std::span<const uint8_t> at_symbol) {
  Arm64SledStart start;
  if (at_symbol.size() >= kInsnBytes && is_landing_pad(read_word(at_symbol, 0))) {
    start.landing_pad = read_word(at_symbol, 0);
    start.offset = kInsnBytes;
  }
  if (at_symbol.size() < start.offset + kSiteBytes) return start;
  const uint32_t first = read_word(at_symbol, start.offset);
  const uint32_t live = read_word(at_symbol, start.offset + kLiveOffset);
  const bool live_ok = live == kNop || (live & kBranchOpcodeMask) == kBlOpcode;
  start.found = (first == kNop && live == kNop) || (first == kMovX9X30 && live_ok);
  return start;
}

Insn arm64_init_word() { return insn_of(kMovX9X30); }
Insn arm64_deinit_word() { return insn_of(kNop); }

std::unique_ptr<Backend> make_arm64_backend(const TrampolineEmitter& emitter) {
  return std::make_unique<Arm64Backend>(emitter);
}

}  // namespace ftjit
