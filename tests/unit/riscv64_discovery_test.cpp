// SPDX-License-Identifier: MIT
// riscv64's part of the discovery tests (isa_discovery_test.cpp): its
// fixtures (GCC and clang, =8,4 rv64gc and =4,2 rv64g), the NOPs its
// compilers put at a site, the riscv64 backend's verdict on each sled, and
// that no word is a landing pad.
//
// What the compilers emit (GCC 12.2, clang 16; tests/unit/riscv64_discovery.cmake):
//
//   =8,4:  sym-8 [c.nop][c.nop][c.nop][c.nop] sym [c.nop][c.nop][c.nop][c.nop] body
//   =4,2:  sym-8 [  nop   ][  nop   ]         sym [  nop   ][  nop   ]         body
//
// Both put the 8 bytes the backend writes (auipc, then the live word) at
// the symbol and the 8-byte literal before it; riscv64 has no landing pad
// between symbol and sled. -falign-functions=8 keeps entries and literals
// 8-aligned, which the site's stub word needs; with =2 (rv64gc) some are
// not, and the engine must see that.
#include <array>
#include <memory>

#include "backends/backend.h"
#include "backends/riscv64/riscv64_backend.h"
#include "backends/riscv64/riscv64_encoding.h"
#include "core/sled_layout.h"
#include "isa_discovery.h"

#ifndef FTJIT_RISCV64_HAVE_EMITTER
#define FTJIT_RISCV64_HAVE_EMITTER 0
#endif

namespace ftjit::isa_discovery {
namespace {

// The two sleds' 8 bytes (either side of the symbol), written out rather
// than taken from riscv64_encoding.h, which the backend reads them with.
constexpr std::array<uint8_t, 8> kCNopSled = {0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00};
constexpr std::array<uint8_t, 8> kNopSled = {0x13, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00};

const std::array<uint8_t, 8>& sled_of(const IsaFixture& f) {
  return f.layout == "p8_4" ? kCNopSled : kNopSled;
}

std::vector<uint8_t> bytes(const std::array<uint8_t, 8>& sled, int times) {
  std::vector<uint8_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), sled.begin(), sled.end());
  return out;
}

// An agent's emitter is a proxy to the host's generator; here nothing
// stands behind it, which classify_entry must not need.
class NoEmitter final : public TrampolineEmitter {
 public:
  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest&, uint64_t) const override {
    return make_error(FTJIT_E_UNSUPPORTED, "no riscv64 code generator in this test");
  }
  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest&,
                                                    uint64_t) const override {
    return make_error(FTJIT_E_UNSUPPORTED, "no riscv64 code generator in this test");
  }
};

}  // namespace

// The agent's way (make_backend around a remote emitter: the only one in
// the riscv64 cross build, which has no LLVM) and, with LLVM MC, the
// in-process one the CLI and an embedder use.
std::vector<NamedBackend> isa_backends() {
  static const NoEmitter kNoEmitter;
  static const std::unique_ptr<Backend> kAgent = make_backend(Isa::kRiscv64, kNoEmitter);
  std::vector<NamedBackend> out = {{"make_backend", kAgent.get()}};
#if FTJIT_RISCV64_HAVE_EMITTER
  out.push_back({"backend_for", backend_for(Isa::kRiscv64)});
#endif
  return out;
}

const Isa kFixtureIsa = Isa::kRiscv64;
const uint16_t kFixtureMachine = EM_RISCV;

std::vector<IsaFixture> isa_fixtures(const std::vector<std::string>& compilers) {
  std::vector<IsaFixture> out;
  for (const auto& cc : compilers) {
    for (const char* layout : {"p8_4", "p4_2"}) {
      const std::string tag = cc + "_" + layout;
      out.push_back({"libfx_rv64_" + tag + ".so", cc, layout, 0, true, false, FixtureKind::kLibrary});
      out.push_back({"fx_exe_rv64_" + tag, cc, layout, 0, true, false, FixtureKind::kExecutable});
      out.push_back({"libfx_rv64_" + tag + ".stripped.so", cc, layout, 0, true, false,
                     FixtureKind::kStripped});
    }
    out.push_back({"libfx_rv64_" + cc + "_p8_4_align2.so", cc, "p8_4", 0, true, true, FixtureKind::kLibrary});
  }
  return out;
}

void check_compiler_sled(const IsaFixture& f, const TrustedElf& elf, const DiscoveredSite& s) {
  // The full sled, prefix and all, from the record: what the compiler
  // put there whether or not a symbol names it.
  EXPECT_EQ(code_at(elf, s.record(), 16), bytes(sled_of(f), 2)) << std::hex << s.record();
  if (s.name.empty()) return;
  // The literal and the entry share their place on the 8-byte grid: an
  // entry the site's stub word cannot serve is one whose literal call-ops
  // cannot store either.
  const uint32_t entry_align = isa_backends().front().backend->traits().entry_align;
  ASSERT_EQ(entry_align, 8u);
  EXPECT_EQ(s.entry % entry_align == 0, s.slot_state == OpsSlot::kAligned) << std::hex << s.entry;
  // Even -falign-functions=2 keeps the 2-byte instruction grid.
  EXPECT_EQ(s.entry % 2, 0u);
  // The compiler's NOPs: the layout's, four c.nop or two nop, at the
  // entry and in the literal before it.
  EXPECT_EQ(code_at(elf, s.entry, 8), bytes(sled_of(f), 1)) << std::hex << s.entry;
  EXPECT_EQ(code_at(elf, s.slot, 8), bytes(sled_of(f), 1)) << std::hex << s.slot;
}

const uint32_t kForeignWord = 0x00150513;  // addi a0, a0, 1

void check_backend_at_site(const IsaFixture& f, const Backend& backend, const TrustedElf&,
                           const DiscoveredSite& s, const std::vector<uint8_t>& site) {
  // The backend reads the encodings' header; the file says the same.
  if (f.layout == "p8_4") {
    uint16_t half;
    std::memcpy(&half, site.data(), sizeof half);
    EXPECT_EQ(half, riscv64::kCNop);
  } else {
    uint32_t word;
    std::memcpy(&word, site.data(), sizeof word);
    EXPECT_EQ(word, riscv64::kNop);
  }
  // One 2-byte instruction among c.nops; half of each kind of NOP (what
  // rv64gc with =4,2 leaves at the entry: two c.nop, then the body).
  for (uint32_t at : {2u, 6u}) {
    std::vector<uint8_t> patched = site;
    const uint16_t c_addi = 0x0505;  // c.addi a0, 1
    std::memcpy(patched.data() + at, &c_addi, 2);
    EXPECT_EQ(backend.classify_entry(s.entry, patched).kind, SledKind::kUnknown) << at;
  }
  std::vector<uint8_t> mixed(kCNopSled.begin(), kCNopSled.begin() + 4);
  mixed.insert(mixed.end(), kNopSled.begin(), kNopSled.begin() + 4);
  EXPECT_EQ(backend.classify_entry(s.entry, mixed).kind, SledKind::kUnknown);
  // An auipc t0 + jalr t0 pair found there: a call the pair's offsets
  // place relative to the entry.
  std::vector<uint8_t> pair(8);
  const uint32_t auipc = 0x12345297;  // auipc t0, 0x12345
  const uint32_t jalr = 0xff0282e7;   // jalr t0, -16(t0)
  std::memcpy(pair.data(), &auipc, 4);
  std::memcpy(pair.data() + 4, &jalr, 4);
  const SledInfo call = backend.classify_entry(s.entry, pair);
  EXPECT_EQ(call.kind, SledKind::kCall);
  EXPECT_EQ(call.call_target, s.entry + 0x12345000 - 16);
}

}  // namespace ftjit::isa_discovery

namespace ftjit {
namespace {

// Discovery's pad list is arm64's and must not reach riscv64 files: a
// riscv64 site starts at its symbol whatever the symbol's first word is
// (Zicfilp's lpad included: GCC 12 and clang 16 emit none, and a
// function that began with one would be refused at classify_entry).
TEST(Riscv64DiscoveryPads, NoWordIsALandingPad) {
  const uint32_t words[] = {arm64::kBtiC, arm64::kPaciasp, 0x00000017 /* lpad 0 */,
                            riscv64::kNop, 0x00010001 /* c.nop c.nop */};
  for (uint32_t w : words) {
    const uint32_t code[3] = {w, riscv64::kNop, riscv64::kNop};
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(code), sizeof code);
    EXPECT_EQ(landing_pad_bytes(Isa::kRiscv64, bytes), 0u) << std::hex << w;
  }
  // The same bytes are a pad to an arm64 reader: the zero above is the ISA's.
  const uint32_t bti[3] = {arm64::kBtiC, 0, 0};
  EXPECT_EQ(landing_pad_bytes(Isa::kArm64, {reinterpret_cast<const uint8_t*>(bti), sizeof bti}),
            arm64::kLandingPadBytes);
}

}  // namespace
}  // namespace ftjit
