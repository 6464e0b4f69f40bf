// SPDX-License-Identifier: MIT
// riscv64 sites (riscv64_backend.h, (a) and (b)): recognised and checked
// here; every instruction written comes from the emitter (LLVM MC, maybe
// in another process): SiteCode, once per module.
#include "backends/riscv64/riscv64_backend.h"

#include <cstring>
#include <memory>

#include "backends/riscv64/riscv64_encoding.h"

namespace ftjit {
namespace {

using namespace riscv64;

uint32_t read_word(std::span<const uint8_t> bytes, size_t offset) {
  uint32_t word;
  std::memcpy(&word, bytes.data() + offset, sizeof word);
  return word;
}

// The compiler's sled: four c.nop (=8,4) or two nop (=4,2).
bool is_compiler_sled(std::span<const uint8_t> b) {
  uint16_t half[4];
  std::memcpy(half, b.data(), sizeof half);
  const bool c_nops = half[0] == kCNop && half[1] == kCNop && half[2] == kCNop && half[3] == kCNop;
  const bool nops = read_word(b, 0) == kNop && read_word(b, 4) == kNop;
  return c_nops || nops;
}

class Riscv64Backend final : public Backend {
 public:
  explicit Riscv64Backend(const TrampolineEmitter& emitter) : emitter_(emitter) {}
  const IsaTraits& traits() const override { return traits_; }

  // Only the compiler's sled is usable: an auipc left by someone else
  // (another tool, or an ftjit that died) names a window that is not our
  // stub's, and is left alone.
  SledInfo classify_entry(uint64_t entry, std::span<const uint8_t> b) const override {
    SledInfo info;
    if (b.size() < kSiteBytes) return info;
    if (is_compiler_sled(b)) {
      info.kind = SledKind::kNopSled;
      return info;
    }
    const uint32_t first = read_word(b, 0);
    const uint32_t live = read_word(b, kLiveOffset);
    if ((first & kAuipcT0Mask) == kAuipcT0 && (live & kJalrT0T0Mask) == kJalrT0T0) {
      info.kind = SledKind::kCall;
      info.call_target = pair_target(entry, first, live);
    }
    return info;
  }

  // The init depends on the module's stub distance: SiteCode::init.
  Insn encode_init() const override { return Insn{}; }

  // The live word disabled: the 4-byte nop, over both layouts' sleds
  // (de-init puts the compiler's bytes back).
  Insn encode_nop() const override {
    Insn insn;
    std::memcpy(insn.bytes, &kNop, sizeof kNop);
    insn.size = kInsnBytes;
    return insn;
  }

  // Sites call their stubs only, with SiteCode::call: no per-site call or
  // jump is ever encoded, and no stub is encoded here.
  bool encode_call(uint64_t, uint64_t, Insn*) const override { return false; }
  bool encode_jump(uint64_t, uint64_t, Insn*) const override { return false; }
  bool encode_stub(uint64_t, uint64_t, uint8_t*) const override { return false; }

  const LiveProtocol& live_protocol() const override { return protocol_; }

  // One aligned word changes live; no thread ever traps at a site.
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
  Result<SiteCode> emit_site_code(uint64_t entry, uint64_t stub) const override {
    return emitter_.emit_site_code(entry, stub);
  }

 private:
  const TrampolineEmitter& emitter_;
  IsaTraits traits_ = [] {
    IsaTraits t;
    t.isa = Isa::kRiscv64;
    t.call_bytes = kInsnBytes;
    t.slot_bytes = kLiteralBytes;
    t.slot_align = 8;
    // auipc+jalr: +-2 GiB; 4 KiB of margin, as on the other ISAs.
    t.branch_reach = (int64_t{1} << 31) - 4096;
    t.short_entry_reach = (int64_t{1} << 20) - 4096;  // jal
    t.code_align = 16;
    t.stub_use = StubUse::kEverySite;
    t.stub_bytes = 12;         // auipc t1, 0; ld t1, -8(t1); jr t1
    t.stub_word_offset = -8;   // the word before the stub's code
    t.entry_align = 8;
    t.reloc_jump_slot = 5;     // R_RISCV_JUMP_SLOT
    t.reloc_glob_dat = 2;      // R_RISCV_64 (riscv has no GLOB_DAT)
    t.reloc_abs64 = 2;         // R_RISCV_64
    t.reloc_irelative = 58;    // R_RISCV_IRELATIVE
    t.live_offset = kLiveOffset;
    t.site_bytes = kSiteBytes;
    t.site_flags = "-fpatchable-function-entry=8,4 (rv64gc) or =4,2 (rv64g) -falign-functions=8";
    t.slot_flags = "-fpatchable-function-entry=8,4 (rv64gc) or =4,2 (rv64g) -falign-functions=8";
    return t;
  }();
  // The new word, whole, in one store.
  LiveProtocol protocol_{{WriteStep{0, 0, true, {}}}, 1, LiveChange::kAlignedStore};
};

}  // namespace

std::unique_ptr<Backend> make_riscv64_backend(const TrampolineEmitter& emitter) {
  return std::make_unique<Riscv64Backend>(emitter);
}

}  // namespace ftjit
