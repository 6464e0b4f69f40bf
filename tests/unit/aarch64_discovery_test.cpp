// SPDX-License-Identifier: MIT
// Discovery on arm64 fixtures (GCC and clang, =4,2 and =2, with and without BTI): exact sites, and the backend's verdict on each sled.
//
// What the compilers emit (GCC 12.2, clang 16; tests/fixtures/aarch64_fixtures.cmake),
// the oracle these tests state by layout and check against the files:
//
//   layout        record     symbol   site start (entry)  ops slot
//   =4,2          sym - 8    sym      sym                 sym - 8
//   =4,2 + bti    sym - 8    sym      sym + 4             sym - 8
//   =2            sym        sym      sym                 none
//   =2 + bti      sym + 4    sym      sym + 4             none
//
//   =4,2 + bti:  sym-8 [nop][nop] sym [bti c][nop][nop] body   (paciasp, if
//   =2   + bti:                   sym [bti c][nop][nop] body    any, follows)
//
// The record always points at the first NOP; the `bti c` stays at the
// symbol, where indirect calls land, and the sled follows it. Built and
// run on the host and, cross-built, as arm64 code under qemu-aarch64.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "backends/arm64/arm64_backend.h"
#include "backends/arm64/arm64_encoding.h"
#include "backends/backend.h"
#include "core/elf_image.h"
#include "core/site_discovery.h"
#include "core/sled_layout.h"
#include "discovery_fixtures.h"

#ifndef FTJIT_AARCH64_FIXTURE_HAVE_CLANG
#define FTJIT_AARCH64_FIXTURE_HAVE_CLANG 0
#endif

namespace ftjit {
namespace {

using testing::FixtureKind;
using testing::TrustedElf;
using testing::read_file;

std::span<const uint8_t> as_span(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

// ============================================================================
// Fixture catalogue
// ============================================================================

enum class A64Layout { kP4_2, kP2 };

struct A64Fixture {
  std::string file;
  std::string compiler;
  A64Layout layout;
  bool bti;        // -mbranch-protection=standard
  bool align4;     // -falign-functions=4 instead of 8 (=4,2 only)
  FixtureKind kind;

  std::string path() const { return std::string(FTJIT_FIXTURE_DIR) + "/" + file; }
  uint32_t pad_bytes() const { return bti ? 4 : 0; }
};

void PrintTo(const A64Fixture& f, std::ostream* os) { *os << f.file; }

std::vector<A64Fixture> a64_fixtures() {
  std::vector<A64Fixture> out;
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_AARCH64_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    for (A64Layout layout : {A64Layout::kP4_2, A64Layout::kP2}) {
      for (bool bti : {false, true}) {
        const std::string tag = cc + (layout == A64Layout::kP4_2 ? "_p4_2" : "_p2") +
                                (bti ? "_bti" : "");
        out.push_back({"libfx_a64_" + tag + ".so", cc, layout, bti, false, FixtureKind::kLibrary});
        out.push_back({"fx_exe_a64_" + tag, cc, layout, bti, false, FixtureKind::kExecutable});
        if (bti) {
          out.push_back({"libfx_a64_" + tag + ".stripped.so", cc, layout, bti, false,
                         FixtureKind::kStripped});
        }
      }
    }
    out.push_back({"libfx_a64_" + cc + "_p4_2_align4.so", cc, A64Layout::kP4_2, false, true,
                   FixtureKind::kLibrary});
  }
  return out;
}

std::string test_name(const A64Fixture& f) {
  std::string s;
  for (char c : f.file) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s;
}

// ============================================================================
// An independent, trusting reader: symbols by name and code words
// ============================================================================

// Function symbols by name from .symtab, or .dynsym in a stripped file.
std::map<std::string, uint64_t> symbols_by_name(const TrustedElf& elf) {
  std::map<std::string, uint64_t> out;
  auto index = elf.find_section_type(SHT_SYMTAB);
  if (!index) index = elf.find_section_type(SHT_DYNSYM);
  if (!index) return out;
  const Elf64_Shdr symtab = elf.section(*index);
  const Elf64_Shdr strtab = elf.section(symtab.sh_link);
  for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= symtab.sh_size; off += sizeof(Elf64_Sym)) {
    Elf64_Sym sym;
    std::memcpy(&sym, elf.bytes.data() + symtab.sh_offset + off, sizeof sym);
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
    out[reinterpret_cast<const char*>(elf.bytes.data() + strtab.sh_offset + sym.st_name)] =
        sym.st_value;
  }
  return out;
}

uint32_t word_at(const TrustedElf& elf, uint64_t vaddr) {
  auto off = elf.file_offset(vaddr);
  if (!off || *off + 4 > elf.bytes.size()) return 0;
  uint32_t w;
  std::memcpy(&w, elf.bytes.data() + *off, 4);
  return w;
}

// `n` bytes of the file at link-time address vaddr (empty if unmapped).
std::vector<uint8_t> code_at(const TrustedElf& elf, uint64_t vaddr, size_t n) {
  auto off = elf.file_offset(vaddr);
  if (!off || *off + n > elf.bytes.size()) return {};
  return {elf.bytes.begin() + static_cast<ptrdiff_t>(*off),
          elf.bytes.begin() + static_cast<ptrdiff_t>(*off + n)};
}

// ============================================================================
// Fixture files
// ============================================================================

class Aarch64DiscoveryTest : public ::testing::TestWithParam<A64Fixture> {
 protected:
  void SetUp() override {
    const A64Fixture& f = GetParam();
    if (!testing::file_exists(f.path())) {
      if (f.kind == FixtureKind::kStripped) GTEST_SKIP() << "no aarch64-linux-gnu-strip";
      FAIL() << "fixture missing: " << f.path();
    }
    bytes_ = read_file(f.path());
    auto img = ElfImage::parse(as_span(bytes_));
    ASSERT_TRUE(img.ok()) << img.error().message;
    img_ = std::move(img.value());
    auto module = discover_sites(img_, f.path(), 0);
    ASSERT_TRUE(module.ok()) << module.error().message;
    module_ = std::move(module.value());
  }

  // The site discovered for `name`, or nullptr.
  const DiscoveredSite* site_named(const std::string& name) const {
    for (const auto& s : module_.sites) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  std::vector<uint8_t> bytes_;
  ElfImage img_;
  DiscoveredModule module_;
};

TEST_P(Aarch64DiscoveryTest, ModuleIsArm64) {
  EXPECT_EQ(img_.isa(), Isa::kArm64);
  EXPECT_TRUE(img_.is_dynamic());
  EXPECT_EQ(module_.isa, Isa::kArm64);
  EXPECT_STREQ(isa_name(module_.isa), "arm64");
  EXPECT_TRUE(module_.has_patchable_section);
  EXPECT_TRUE(std::is_sorted(module_.sites.begin(), module_.sites.end(),
                             [](const auto& a, const auto& b) { return a.entry < b.entry; }));
}

// The names against the fixture sources' hand-written list; the addresses
// against the table at the top of this file, from each symbol's address
// as an independent reader finds it.
TEST_P(Aarch64DiscoveryTest, SitesAreExactlyTheFunctionsOfTheSourceInTheirLayout) {
  const A64Fixture& f = GetParam();
  const TrustedElf elf(bytes_);
  const auto symbols = symbols_by_name(elf);
  auto expected = testing::library_functions();
  if (f.kind == FixtureKind::kExecutable) expected.push_back({"main", "main", true});

  std::set<std::string> want_named;
  size_t want_unnamed = 0;
  for (const auto& fn : expected) {
    if (f.kind == FixtureKind::kStripped && !fn.exported) {
      ++want_unnamed;
    } else {
      want_named.insert(fn.name);
    }
  }
  std::set<std::string> named;
  size_t unnamed = 0;
  size_t misaligned = 0;
  for (const DiscoveredSite& s : module_.sites) {
    if (s.name.empty()) {
      // No symbol says where the function starts: the record stands for it.
      ++unnamed;
      EXPECT_EQ(s.entry, s.record);
      EXPECT_EQ(s.symbol, 0u);
      EXPECT_EQ(s.slot_state, OpsSlot::kNone);
      continue;
    }
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(named.insert(s.name).second) << "duplicate site";
    auto sym_it = symbols.find(s.name);
    ASSERT_NE(sym_it, symbols.end());
    const uint64_t sym = sym_it->second;
    const uint64_t pad = f.pad_bytes();
    EXPECT_EQ(s.symbol, sym);
    EXPECT_EQ(s.entry, sym + pad);
    EXPECT_EQ(s.pad_bytes, pad);
    if (f.layout == A64Layout::kP4_2) {
      EXPECT_EQ(s.record, sym - 8);
      EXPECT_EQ(s.prefix_bytes, 8 + pad);
      EXPECT_EQ(s.slot, sym - 8);
      const bool aligned = (sym - 8) % 8 == 0;
      if (!f.align4) {
        EXPECT_TRUE(aligned) << std::hex << sym;
      }
      misaligned += aligned ? 0 : 1;
      EXPECT_EQ(s.slot_state, aligned ? OpsSlot::kAligned : OpsSlot::kMisaligned);
      EXPECT_EQ(ops_slot_refusal(s.slot_state) == nullptr, aligned);
    } else {
      EXPECT_EQ(s.record, sym + pad);
      EXPECT_EQ(s.prefix_bytes, 0u);
      EXPECT_EQ(s.slot, 0u);
      EXPECT_EQ(s.slot_state, OpsSlot::kNone);
    }
    // What is at those addresses in the file: the pad at the symbol, the
    // two NOPs at the site start, two more before the symbol with =4,2.
    EXPECT_EQ(word_at(elf, sym), f.bti ? arm64::kBtiC : arm64::kNop) << std::hex << sym;
    EXPECT_EQ(word_at(elf, s.entry), arm64::kNop);
    EXPECT_EQ(word_at(elf, s.entry + 4), arm64::kNop);
    if (f.layout == A64Layout::kP4_2) {
      EXPECT_EQ(word_at(elf, sym - 8), arm64::kNop);
      EXPECT_EQ(word_at(elf, sym - 4), arm64::kNop);
    }
  }
  EXPECT_EQ(named, want_named);
  EXPECT_EQ(unnamed, want_unnamed);
  EXPECT_EQ(module_.sites.size(), expected.size());
  // -falign-functions=4 lets both compilers place some sleds 4 bytes off
  // the 8-byte grid: those slots are refused, the others kept.
  if (f.align4) {
    EXPECT_GT(misaligned, 0u);
    EXPECT_LT(misaligned, module_.sites.size());
  }
}

// What the engine asks the backend about every discovered site
// (runtime/engine.cpp, Engine::add_modules): the compiler's sled, from the
// site start, is a NOP sled it may initialise; anything else is not.
TEST_P(Aarch64DiscoveryTest, BackendSeesACompilerSledAtEverySiteStart) {
  const Backend* backend = backend_for(Isa::kArm64);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->traits().isa, Isa::kArm64);
  // The engine reads site_bytes from the entry: `mov x9, x30`'s word, then
  // the live word at live_offset.
  const uint32_t live = backend->traits().live_offset;
  const uint32_t site_bytes = backend->traits().site_bytes;
  ASSERT_EQ(site_bytes, live + 4);
  const TrustedElf elf(bytes_);
  for (const DiscoveredSite& s : module_.sites) {
    SCOPED_TRACE(s.name.empty() ? "unnamed record" : s.name);
    const std::vector<uint8_t> site = code_at(elf, s.entry, site_bytes);
    ASSERT_EQ(site.size(), site_bytes);
    // (An unnamed =4,2 record's entry is the literal's two NOPs: NOPs
    // too, though no thread runs them.)
    EXPECT_EQ(backend->classify_entry(s.entry, site).kind, SledKind::kNopSled);
    if (s.name.empty()) continue;

    // The backend's own reading from the symbol agrees on where the sled
    // starts.
    const std::vector<uint8_t> from_symbol = code_at(elf, s.symbol, s.pad_bytes + site_bytes);
    const Arm64SledStart start = find_arm64_sled(from_symbol);
    EXPECT_TRUE(start.found);
    EXPECT_EQ(start.offset, s.pad_bytes);
    EXPECT_EQ(backend->classify_entry(s.symbol, from_symbol).kind, SledKind::kNopSled);

    // Someone else's words in the sled: refused, whichever word it is.
    for (uint32_t at : {0u, live}) {
      std::vector<uint8_t> patched = site;
      const uint32_t add_x0 = 0x91000400;  // add x0, x0, #1
      std::memcpy(patched.data() + at, &add_x0, 4);
      EXPECT_EQ(backend->classify_entry(s.entry, patched).kind, SledKind::kUnknown) << at;
    }
    // Read from the symbol as if it were the start: after a pad that is
    // the pad and one NOP, too short; without one it is the same sled.
    if (s.pad_bytes != 0) {
      EXPECT_EQ(backend->classify_entry(s.symbol, code_at(elf, s.symbol, site_bytes)).kind,
                SledKind::kUnknown);
    }
  }
}

TEST_P(Aarch64DiscoveryTest, LoadBiasShiftsEveryAddress) {
  constexpr uint64_t kBias = 0x0000ffff98760000;  // a page multiple, as the loader's
  auto shifted = discover_sites(img_, "shifted", kBias);
  ASSERT_TRUE(shifted.ok());
  ASSERT_EQ(shifted->sites.size(), module_.sites.size());
  for (size_t i = 0; i < module_.sites.size(); ++i) {
    const DiscoveredSite& a = module_.sites[i];
    const DiscoveredSite& b = shifted->sites[i];
    SCOPED_TRACE(a.name);
    EXPECT_EQ(b.record, a.record + kBias);
    EXPECT_EQ(b.entry, a.entry + kBias);
    EXPECT_EQ(b.symbol, a.name.empty() ? 0 : a.symbol + kBias);
    EXPECT_EQ(b.slot, a.slot_state == OpsSlot::kNone ? 0 : a.slot + kBias);
    EXPECT_EQ(b.slot_state, a.slot_state);
    EXPECT_EQ(b.prefix_bytes, a.prefix_bytes);
    EXPECT_EQ(b.pad_bytes, a.pad_bytes);
    EXPECT_EQ(b.name, a.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Aarch64DiscoveryTest, ::testing::ValuesIn(a64_fixtures()),
                         [](const auto& p) { return test_name(p.param); });

// ============================================================================
// Landing pads: one list for discovery and backend
// ============================================================================

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

// ============================================================================
// The executables are real programs
// ============================================================================

// Linked by each compiler's own driver (clang through the GNU cross
// linker): they must load and run, under qemu-aarch64 on an x86-64 host.
TEST(Aarch64DiscoveryFiles, ExecutablesRun) {
#ifndef FTJIT_AARCH64_RUNNER
  GTEST_SKIP() << "this test runs under qemu-user, where a guest cannot start another guest "
                  "(no binfmt_misc): the host build runs the fixtures";
#else
  for (const auto& f : a64_fixtures()) {
    if (f.kind != FixtureKind::kExecutable) continue;
    const std::string cmd = std::string(FTJIT_AARCH64_RUNNER) + " " + f.path();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
#endif
}

}  // namespace
}  // namespace ftjit
