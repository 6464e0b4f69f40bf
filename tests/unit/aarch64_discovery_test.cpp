// SPDX-License-Identifier: MIT
// arm64's part of the discovery tests (isa_discovery_test.cpp): its fixtures
// (GCC and clang, =4,2 and =2, with and without BTI), the words its
// compilers put at a site, the arm64 backend's verdict on each sled, and
// one list of landing pads for discovery and backend.
//
// What the compilers emit (GCC 12.2, clang 16; tests/unit/aarch64_discovery.cmake):
//
//   =4,2 + bti:  sym-8 [nop][nop] sym [bti c][nop][nop] body   (paciasp, if
//   =2   + bti:                   sym [bti c][nop][nop] body    any, follows)
#include <cstdlib>

#include "backends/arm64/arm64_backend.h"
#include "backends/arm64/arm64_encoding.h"
#include "backends/backend.h"
#include "core/sled_layout.h"
#include "isa_discovery.h"

namespace ftjit::isa_discovery {

const Isa kFixtureIsa = Isa::kArm64;
const uint16_t kFixtureMachine = EM_AARCH64;

std::vector<IsaFixture> isa_fixtures(const std::vector<std::string>& compilers) {
  std::vector<IsaFixture> out;
  for (const auto& cc : compilers) {
    for (const char* layout : {"p4_2", "p2"}) {
      const bool literal = std::string(layout) == "p4_2";
      for (bool bti : {false, true}) {
        const std::string tag = cc + "_" + layout + (bti ? "_bti" : "");
        const uint32_t pad = bti ? arm64::kLandingPadBytes : 0;
        out.push_back({"libfx_a64_" + tag + ".so", cc, layout, pad, literal, false, FixtureKind::kLibrary});
        out.push_back({"fx_exe_a64_" + tag, cc, layout, pad, literal, false, FixtureKind::kExecutable});
        if (bti) {
          out.push_back({"libfx_a64_" + tag + ".stripped.so", cc, layout, pad, literal, false,
                         FixtureKind::kStripped});
        }
      }
    }
    out.push_back({"libfx_a64_" + cc + "_p4_2_align4.so", cc, "p4_2", 0, true, true, FixtureKind::kLibrary});
  }
  return out;
}

uint32_t word_at(const TrustedElf& elf, uint64_t vaddr) {
  const std::vector<uint8_t> bytes = code_at(elf, vaddr, 4);
  uint32_t w = 0;
  if (bytes.size() == 4) std::memcpy(&w, bytes.data(), 4);
  return w;
}

// The pad at the symbol, the two NOPs at the site start, two more before
// the symbol with =4,2.
void check_compiler_sled(const IsaFixture& f, const TrustedElf& elf, const DiscoveredSite& s) {
  if (s.name.empty()) return;
  EXPECT_EQ(word_at(elf, s.symbol()), f.pad != 0 ? arm64::kBtiC : arm64::kNop) << std::hex << s.symbol();
  EXPECT_EQ(word_at(elf, s.entry), arm64::kNop);
  EXPECT_EQ(word_at(elf, s.entry + 4), arm64::kNop);
  if (f.literal) {
    EXPECT_EQ(word_at(elf, s.symbol() - 8), arm64::kNop);
    EXPECT_EQ(word_at(elf, s.symbol() - 4), arm64::kNop);
  }
}

std::vector<NamedBackend> isa_backends() { return {{"backend_for", backend_for(Isa::kArm64)}}; }

const uint32_t kForeignWord = 0x91000400;  // add x0, x0, #1

void check_backend_at_site(const IsaFixture&, const Backend& backend, const TrustedElf& elf,
                           const DiscoveredSite& s, const std::vector<uint8_t>&) {
  // The backend's own reading from the symbol agrees on where the sled
  // starts.
  const uint32_t site_bytes = backend.traits().site_bytes;
  const std::vector<uint8_t> from_symbol = code_at(elf, s.symbol(), s.pad_bytes + site_bytes);
  const Arm64SledStart start = find_arm64_sled(from_symbol);
  EXPECT_TRUE(start.found);
  EXPECT_EQ(start.offset, s.pad_bytes);
  EXPECT_EQ(backend.classify_entry(s.symbol(), from_symbol).kind, SledKind::kNopSled);
  // Read from the symbol as if it were the start: after a pad that is the
  // pad and one NOP, too short; without one it is the same sled.
  if (s.pad_bytes != 0) {
    EXPECT_EQ(backend.classify_entry(s.symbol(), code_at(elf, s.symbol(), site_bytes)).kind,
              SledKind::kUnknown);
  }
}

}  // namespace ftjit::isa_discovery

namespace ftjit {
namespace {

// Every word of the a64 HINT space (nop, bti *, pac*sp, ...) and a few
// others: discovery moves the site start past exactly the words the
// backend skips.
TEST(Aarch64DiscoveryPads, DiscoveryAndBackendAgreeOnEveryHintWord) {
  std::vector<uint32_t> words;
  for (uint32_t imm = 0; imm < 128; ++imm) words.push_back(0xd503201f | (imm << 5));
  words.insert(words.end(), {0xd65f03c0 /* ret */, arm64::kMovX9X30, 0x94000000 /* bl . */,
                             0xf3001efa /* endbr64's bytes as a word */, 0});
  size_t pads = 0;
  for (uint32_t w : words) {
    uint32_t code[3] = {w, arm64::kNop, arm64::kNop};
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(code), sizeof code);
    const uint32_t pad = landing_pad_bytes(Isa::kArm64, bytes);
    const Arm64SledStart start = find_arm64_sled(bytes);
    EXPECT_EQ(pad, start.landing_pad != 0 ? start.offset : 0u) << std::hex << w;
    EXPECT_EQ(start.landing_pad != 0, pad != 0) << std::hex << w;
    EXPECT_EQ(landing_pad_bytes(Isa::kX86_64, bytes), 0u);
    EXPECT_EQ(landing_pad_bytes(Isa::kArm64, bytes.first(3)), 0u);
    pads += pad != 0;
  }
  EXPECT_EQ(pads, 4u);  // bti c, bti jc, paciasp, pacibsp
}

}  // namespace
}  // namespace ftjit
