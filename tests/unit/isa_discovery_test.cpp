// SPDX-License-Identifier: MIT
// Discovery on a cross leg's ISA fixtures (isa_discovery.h): exact sites,
// checked against the layout each fixture was built in and against an
// independent, trusting reader of the file.
//
//   layout with the literal   record = sym - 8     site start = sym + pad   literal at sym - 8
//   layout without one        record = sym + pad   site start = sym + pad   none
//
// The record points at the first NOP; a landing pad (arm64's `bti c`)
// stays at the symbol, where indirect calls land, and the sled follows it.
#include "isa_discovery.h"

#include <algorithm>
#include <cstdlib>

#include "core/sled_layout.h"

namespace ftjit::isa_discovery {

void PrintTo(const IsaFixture& f, std::ostream* os) { *os << f.file; }

std::vector<IsaFixture> fixtures() {
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_ISA_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  return isa_fixtures(compilers);
}

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

std::vector<uint8_t> code_at(const TrustedElf& elf, uint64_t vaddr, size_t n) {
  auto off = elf.file_offset(vaddr);
  if (!off || *off + n > elf.bytes.size()) return {};
  return {elf.bytes.begin() + static_cast<ptrdiff_t>(*off),
          elf.bytes.begin() + static_cast<ptrdiff_t>(*off + n)};
}

}  // namespace ftjit::isa_discovery

using ftjit::DiscoveredSite;
using ftjit::OpsSlot;
using namespace ftjit::isa_discovery;

void ISA_SUITE(DiscoveryTest)::SetUp() {
  const IsaFixture& f = GetParam();
  if (!ftjit::testing::file_exists(f.path())) {
    if (f.kind == FixtureKind::kStripped) GTEST_SKIP() << "no strip for this ISA's files";
    FAIL() << "fixture missing: " << f.path();
  }
  bytes_ = ftjit::testing::read_file(f.path());
  auto img = ftjit::ElfImage::parse({bytes_.data(), bytes_.size()});
  ASSERT_TRUE(img.ok()) << img.error().message;
  img_ = std::move(img.value());
  auto module = ftjit::discover_sites(img_, f.path(), 0);
  ASSERT_TRUE(module.ok()) << module.error().message;
  module_ = std::move(module.value());
}

namespace {

TEST_P(ISA_SUITE(DiscoveryTest), ModuleIsOfTheFixturesIsa) {
  const TrustedElf elf(bytes_);
  ASSERT_EQ(elf.ehdr.e_machine, kFixtureMachine);
  EXPECT_EQ(img_.isa(), kFixtureIsa);
  EXPECT_TRUE(img_.is_dynamic());
  EXPECT_EQ(module_.isa, kFixtureIsa);
  EXPECT_STREQ(ftjit::isa_name(module_.isa), ftjit::isa_name(kFixtureIsa));
  EXPECT_TRUE(module_.has_patchable_section);
  EXPECT_TRUE(std::is_sorted(module_.sites.begin(), module_.sites.end(),
                             [](const auto& a, const auto& b) { return a.entry < b.entry; }));
}

// The names against the fixture sources' hand-written list; the addresses
// against the table at the top of this file, from each symbol's address
// as an independent reader finds it.
TEST_P(ISA_SUITE(DiscoveryTest), SitesAreExactlyTheFunctionsOfTheSourceInTheirLayout) {
  const IsaFixture& f = GetParam();
  const TrustedElf elf(bytes_);
  const auto symbols = symbols_by_name(elf);
  auto expected = ftjit::testing::library_functions();
  if (f.kind == FixtureKind::kExecutable) expected.push_back({"main", "main", true});

  std::map<std::string, std::string> want_named;  // name -> demangled
  size_t want_unnamed = 0;
  for (const auto& fn : expected) {
    if (f.kind == FixtureKind::kStripped && !fn.exported) {
      ++want_unnamed;
    } else {
      want_named[fn.name] = fn.demangled;
    }
  }
  std::map<std::string, std::string> named;
  size_t unnamed = 0;
  size_t misaligned = 0;
  for (const DiscoveredSite& s : module_.sites) {
    SCOPED_TRACE(s.name.empty() ? "unnamed record" : s.name);
    check_compiler_sled(f, elf, s);
    if (s.name.empty()) {
      // No symbol says where the function starts: the record stands for it.
      ++unnamed;
      EXPECT_EQ(s.entry, s.record());
      EXPECT_EQ(s.symbol(), 0u);
      EXPECT_EQ(s.slot_state, OpsSlot::kNone);
      continue;
    }
    EXPECT_TRUE(named.emplace(s.name, s.shown_name()).second) << "duplicate site";
    auto sym_it = symbols.find(std::string(s.name));
    ASSERT_NE(sym_it, symbols.end());
    const uint64_t sym = sym_it->second;
    EXPECT_EQ(s.symbol(), sym);
    EXPECT_EQ(s.entry, sym + f.pad);
    EXPECT_EQ(s.pad_bytes, f.pad);
    EXPECT_EQ(ftjit::landing_pad_bytes(kFixtureIsa, code_at(elf, sym, 12)), f.pad);
    if (f.literal) {
      EXPECT_EQ(s.record(), sym - 8);
      EXPECT_EQ(s.prefix_bytes, 8 + f.pad);
      EXPECT_EQ(s.slot, sym - 8);
      const bool aligned = (sym - 8) % 8 == 0;
      if (!f.off_grid) {
        EXPECT_TRUE(aligned) << std::hex << sym;
      }
      misaligned += aligned ? 0 : 1;
      EXPECT_EQ(s.slot_state, aligned ? OpsSlot::kAligned : OpsSlot::kMisaligned);
      EXPECT_EQ(ftjit::ops_slot_refusal(s.slot_state) == nullptr, aligned);
    } else {
      EXPECT_EQ(s.record(), sym + f.pad);
      EXPECT_EQ(s.prefix_bytes, 0u);
      EXPECT_EQ(s.slot, 0u);
      EXPECT_EQ(s.slot_state, OpsSlot::kNone);
    }
  }
  EXPECT_EQ(named, want_named);
  EXPECT_EQ(unnamed, want_unnamed);
  EXPECT_EQ(module_.sites.size(), expected.size());
  // A smaller -falign-functions lets both compilers place some sleds off
  // the 8-byte grid: those literals are refused, the others kept.
  if (f.off_grid) {
    EXPECT_GT(misaligned, 0u);
    EXPECT_LT(misaligned, module_.sites.size());
  }
}

// What the engine asks the backend about every discovered site
// (runtime/engine.cpp, Engine::add_modules): the compiler's sled, from the
// site start, is a NOP sled it may initialise; anything else is not.
TEST_P(ISA_SUITE(DiscoveryTest), BackendSeesACompilerSledAtEverySiteStart) {
  const TrustedElf elf(bytes_);
  for (const auto& [how, backend] : isa_backends()) {
    SCOPED_TRACE(how);
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->traits().isa, kFixtureIsa);
    // The engine reads site_bytes from the entry: the word the backend
    // writes first, then the live word at live_offset.
    const uint32_t live = backend->traits().live_offset;
    const uint32_t site_bytes = backend->traits().site_bytes;
    ASSERT_EQ(site_bytes, live + 4);
    for (const DiscoveredSite& s : module_.sites) {
      SCOPED_TRACE(s.name.empty() ? "unnamed record" : s.name);
      const std::vector<uint8_t> site = code_at(elf, s.entry, site_bytes);
      ASSERT_EQ(site.size(), site_bytes);
      // (An unnamed record's entry with a literal is the literal's NOPs:
      // NOPs too, though no thread runs them.)
      EXPECT_EQ(backend->classify_entry(s.entry, site).kind, ftjit::SledKind::kNopSled);
      if (s.name.empty()) continue;
      // Someone else's instruction in the sled: refused, whichever word.
      for (uint32_t at : {0u, live}) {
        std::vector<uint8_t> patched = site;
        std::memcpy(patched.data() + at, &kForeignWord, 4);
        EXPECT_EQ(backend->classify_entry(s.entry, patched).kind, ftjit::SledKind::kUnknown) << at;
      }
      check_backend_at_site(GetParam(), *backend, elf, s, site);
    }
  }
}

TEST_P(ISA_SUITE(DiscoveryTest), LoadBiasShiftsEveryAddress) {
  constexpr uint64_t kBias = 0x0000003f98760000;  // a page multiple, as the loader's
  auto shifted = ftjit::discover_sites(img_, "shifted", kBias);
  ASSERT_TRUE(shifted.ok());
  ASSERT_EQ(shifted->sites.size(), module_.sites.size());
  for (size_t i = 0; i < module_.sites.size(); ++i) {
    const DiscoveredSite& a = module_.sites[i];
    const DiscoveredSite& b = shifted->sites[i];
    SCOPED_TRACE(a.name);
    EXPECT_EQ(b.record(), a.record() + kBias);
    EXPECT_EQ(b.entry, a.entry + kBias);
    EXPECT_EQ(b.entry % 8, a.entry % 8);
    EXPECT_EQ(b.symbol(), a.name.empty() ? 0 : a.symbol() + kBias);
    EXPECT_EQ(b.slot, a.slot_state == OpsSlot::kNone ? 0 : a.slot + kBias);
    EXPECT_EQ(b.slot_state, a.slot_state);
    EXPECT_EQ(b.prefix_bytes, a.prefix_bytes);
    EXPECT_EQ(b.pad_bytes, a.pad_bytes);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.shown_name(), a.shown_name());
  }
}

INSTANTIATE_FOR_ISA(Fixtures, ISA_SUITE(DiscoveryTest), ::testing::ValuesIn(fixtures()),
                    [](const auto& p) {
                      std::string s;
                      for (char c : p.param.file) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                      return s;
                    });

// Linked by each compiler's own driver (clang through the GNU cross
// linker): they must load and run, under qemu-user on an x86-64 host.
// fx_main exits 0 when the fixture functions it calls answer as written.
TEST(ISA_SUITE(DiscoveryFiles), ExecutablesRun) {
#ifndef FTJIT_ISA_FIXTURE_RUNNER
  GTEST_SKIP() << "this test runs under qemu-user, where a guest cannot start another guest "
                  "(no binfmt_misc): the host build runs the fixtures";
#else
  size_t ran = 0;
  for (const auto& f : fixtures()) {
    if (f.kind != FixtureKind::kExecutable) continue;
    const std::string cmd = std::string(FTJIT_ISA_FIXTURE_RUNNER) + " " + f.path();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ++ran;
  }
  EXPECT_GT(ran, 0u);
#endif
}

}  // namespace
