// SPDX-License-Identifier: MIT
// Discovery on riscv64 fixtures (GCC and clang, =8,4 rv64gc and =4,2 rv64g): exact sites, and the backend's verdict on each sled.
//
// What the compilers emit (GCC 12.2, clang 16; tests/fixtures/riscv64_fixtures.cmake),
// the oracle these tests state by layout and check against the files:
//
//   layout          record    symbol  site start (entry)  ops literal
//   =8,4  rv64gc    sym - 8   sym     sym                 sym - 8
//   =4,2  rv64g     sym - 8   sym     sym                 sym - 8
//
//   =8,4:  sym-8 [c.nop][c.nop][c.nop][c.nop] sym [c.nop][c.nop][c.nop][c.nop] body
//   =4,2:  sym-8 [  nop   ][  nop   ]         sym [  nop   ][  nop   ]         body
//
// Both put the 8 bytes the backend writes (auipc, then the live word) at
// the symbol and the 8-byte literal before it; riscv64 has no landing pad
// between symbol and sled. -falign-functions=8 keeps entries and literals
// 8-aligned, which the site's stub word needs; with =2 (rv64gc) some are
// not, and the engine must see that. Built and run on the host and,
// cross-built, as riscv64 code under qemu-riscv64.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "backends/backend.h"
#include "backends/riscv64/riscv64_backend.h"
#include "backends/riscv64/riscv64_encoding.h"
#include "core/elf_image.h"
#include "core/site_discovery.h"
#include "core/sled_layout.h"
#include "discovery_fixtures.h"

#ifndef FTJIT_RISCV64_FIXTURE_HAVE_CLANG
#define FTJIT_RISCV64_FIXTURE_HAVE_CLANG 0
#endif
#ifndef FTJIT_RISCV64_HAVE_EMITTER
#define FTJIT_RISCV64_HAVE_EMITTER 0
#endif

namespace ftjit {
namespace {

using testing::FixtureKind;
using testing::TrustedElf;
using testing::read_file;

std::span<const uint8_t> as_span(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

// The two sleds' 8 bytes (either side of the symbol), written out rather
// than taken from riscv64_encoding.h, which the backend reads them with.
constexpr std::array<uint8_t, 8> kCNopSled = {0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00};
constexpr std::array<uint8_t, 8> kNopSled = {0x13, 0x00, 0x00, 0x00, 0x13, 0x00, 0x00, 0x00};

// ============================================================================
// Fixture catalogue
// ============================================================================

enum class Rv64Layout { kP8_4, kP4_2 };

struct Rv64Fixture {
  std::string file;
  std::string compiler;
  Rv64Layout layout;
  bool align2;  // -falign-functions=2 instead of 8 (=8,4 only)
  FixtureKind kind;

  std::string path() const { return std::string(FTJIT_FIXTURE_DIR) + "/" + file; }
  const std::array<uint8_t, 8>& sled() const {
    return layout == Rv64Layout::kP8_4 ? kCNopSled : kNopSled;
  }
};

void PrintTo(const Rv64Fixture& f, std::ostream* os) { *os << f.file; }

std::vector<Rv64Fixture> rv64_fixtures() {
  std::vector<Rv64Fixture> out;
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_RISCV64_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    for (Rv64Layout layout : {Rv64Layout::kP8_4, Rv64Layout::kP4_2}) {
      const std::string tag = cc + (layout == Rv64Layout::kP8_4 ? "_p8_4" : "_p4_2");
      out.push_back({"libfx_rv64_" + tag + ".so", cc, layout, false, FixtureKind::kLibrary});
      out.push_back({"fx_exe_rv64_" + tag, cc, layout, false, FixtureKind::kExecutable});
      out.push_back({"libfx_rv64_" + tag + ".stripped.so", cc, layout, false,
                     FixtureKind::kStripped});
    }
    out.push_back({"libfx_rv64_" + cc + "_p8_4_align2.so", cc, Rv64Layout::kP8_4, true,
                   FixtureKind::kLibrary});
  }
  return out;
}

std::string test_name(const Rv64Fixture& f) {
  std::string s;
  for (char c : f.file) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s;
}

// ============================================================================
// The backends the engine would ask
// ============================================================================

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

struct NamedBackend {
  const char* how;
  const Backend* backend;
};

// The agent's way (make_backend around a remote emitter: the only one in
// the riscv64 cross build, which has no LLVM) and, with LLVM MC, the
// in-process one the CLI and an embedder use.
std::vector<NamedBackend> riscv64_backends() {
  static const NoEmitter kNoEmitter;
  static const std::unique_ptr<Backend> kAgent = make_backend(Isa::kRiscv64, kNoEmitter);
  std::vector<NamedBackend> out = {{"make_backend", kAgent.get()}};
#if FTJIT_RISCV64_HAVE_EMITTER
  out.push_back({"backend_for", backend_for(Isa::kRiscv64)});
#endif
  return out;
}

const IsaTraits& rv64_traits() { return riscv64_backends().front().backend->traits(); }

// ============================================================================
// An independent, trusting reader: symbols by name and code bytes
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

// `n` bytes of the file at link-time address vaddr (empty if unmapped).
std::vector<uint8_t> code_at(const TrustedElf& elf, uint64_t vaddr, size_t n) {
  auto off = elf.file_offset(vaddr);
  if (!off || *off + n > elf.bytes.size()) return {};
  return {elf.bytes.begin() + static_cast<ptrdiff_t>(*off),
          elf.bytes.begin() + static_cast<ptrdiff_t>(*off + n)};
}

std::vector<uint8_t> twice(const std::array<uint8_t, 8>& sled) {
  std::vector<uint8_t> out(sled.begin(), sled.end());
  out.insert(out.end(), sled.begin(), sled.end());
  return out;
}

// ============================================================================
// Fixture files
// ============================================================================

class Riscv64DiscoveryTest : public ::testing::TestWithParam<Rv64Fixture> {
 protected:
  void SetUp() override {
    const Rv64Fixture& f = GetParam();
    if (!testing::file_exists(f.path())) {
      if (f.kind == FixtureKind::kStripped) GTEST_SKIP() << "no riscv64-linux-gnu-strip";
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

  std::vector<uint8_t> bytes_;
  ElfImage img_;
  DiscoveredModule module_;
};

TEST_P(Riscv64DiscoveryTest, ModuleIsRiscv64) {
  const TrustedElf elf(bytes_);
  ASSERT_EQ(elf.ehdr.e_machine, EM_RISCV);
  EXPECT_EQ(img_.isa(), Isa::kRiscv64);
  EXPECT_TRUE(img_.is_dynamic());
  EXPECT_EQ(module_.isa, Isa::kRiscv64);
  EXPECT_STREQ(isa_name(module_.isa), "riscv64");
  EXPECT_TRUE(module_.has_patchable_section);
  EXPECT_TRUE(std::is_sorted(module_.sites.begin(), module_.sites.end(),
                             [](const auto& a, const auto& b) { return a.entry < b.entry; }));
}

// The names against the fixture sources' hand-written list; the addresses
// against the table at the top of this file, from each symbol's address
// as an independent reader finds it.
TEST_P(Riscv64DiscoveryTest, SitesAreExactlyTheFunctionsOfTheSourceInTheirLayout) {
  const Rv64Fixture& f = GetParam();
  const TrustedElf elf(bytes_);
  const auto symbols = symbols_by_name(elf);
  auto expected = testing::library_functions();
  if (f.kind == FixtureKind::kExecutable) expected.push_back({"main", "main", true});
  const uint32_t entry_align = rv64_traits().entry_align;
  ASSERT_EQ(entry_align, 8u);

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
    // The full sled, prefix and all, from the record: what the compiler
    // put there whether or not a symbol names it.
    EXPECT_EQ(code_at(elf, s.record, 16), twice(f.sled())) << std::hex << s.record;
    if (s.name.empty()) {
      // No symbol says where the function starts: the record stands for it.
      ++unnamed;
      EXPECT_EQ(s.entry, s.record);
      EXPECT_EQ(s.symbol, 0u);
      EXPECT_EQ(s.slot_state, OpsSlot::kNone);
      continue;
    }
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(named.emplace(s.name, s.demangled).second) << "duplicate site";
    auto sym_it = symbols.find(s.name);
    ASSERT_NE(sym_it, symbols.end());
    const uint64_t sym = sym_it->second;
    EXPECT_EQ(s.symbol, sym);
    EXPECT_EQ(s.entry, sym);
    EXPECT_EQ(s.pad_bytes, 0u);
    EXPECT_EQ(landing_pad_bytes(Isa::kRiscv64, code_at(elf, sym, 8)), 0u);
    EXPECT_EQ(s.record, sym - 8);
    EXPECT_EQ(s.prefix_bytes, 8u);
    EXPECT_EQ(s.slot, sym - 8);
    const bool aligned = (sym - 8) % 8 == 0;
    if (!f.align2) {
      EXPECT_TRUE(aligned) << std::hex << sym;
    }
    misaligned += aligned ? 0 : 1;
    EXPECT_EQ(s.slot_state, aligned ? OpsSlot::kAligned : OpsSlot::kMisaligned);
    EXPECT_EQ(ops_slot_refusal(s.slot_state) == nullptr, aligned);
    // The literal and the entry share their place on the 8-byte grid: an
    // entry the site's stub word cannot serve is one whose literal
    // call-ops cannot store either.
    EXPECT_EQ(s.entry % entry_align == 0, aligned) << std::hex << s.entry;
    // Even -falign-functions=2 keeps the 2-byte instruction grid.
    EXPECT_EQ(s.entry % 2, 0u);
    // The compiler's NOPs: the layout's, four c.nop or two nop, at the
    // entry and in the literal before it.
    EXPECT_EQ(code_at(elf, s.entry, 8), std::vector<uint8_t>(f.sled().begin(), f.sled().end()))
        << std::hex << s.entry;
    EXPECT_EQ(code_at(elf, s.slot, 8), std::vector<uint8_t>(f.sled().begin(), f.sled().end()))
        << std::hex << s.slot;
  }
  EXPECT_EQ(named, want_named);
  EXPECT_EQ(unnamed, want_unnamed);
  EXPECT_EQ(module_.sites.size(), expected.size());
  // -falign-functions=2 lets both compilers place some sleds off the
  // 8-byte grid: the engine refuses those entries (entry_align), the
  // others stay usable.
  if (f.align2) {
    EXPECT_GT(misaligned, 0u);
    EXPECT_LT(misaligned, module_.sites.size());
  }
}

// What the engine asks the backend about every discovered site
// (runtime/engine.cpp, Engine::add_modules): the compiler's sled, from the
// site start, is a NOP sled it may initialise; anything else is not.
TEST_P(Riscv64DiscoveryTest, BackendSeesACompilerSledAtEverySiteStart) {
  const TrustedElf elf(bytes_);
  // The backend reads the encodings' header; the file says the same.
  const std::array<uint8_t, 8>& sled = GetParam().sled();
  if (GetParam().layout == Rv64Layout::kP8_4) {
    uint16_t half;
    std::memcpy(&half, sled.data(), sizeof half);
    EXPECT_EQ(half, riscv64::kCNop);
  } else {
    uint32_t word;
    std::memcpy(&word, sled.data(), sizeof word);
    EXPECT_EQ(word, riscv64::kNop);
  }
  for (const auto& [how, backend] : riscv64_backends()) {
    SCOPED_TRACE(how);
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->traits().isa, Isa::kRiscv64);
    // The engine reads site_bytes from the entry: the auipc's place, then
    // the live word at live_offset.
    const uint32_t live = backend->traits().live_offset;
    const uint32_t site_bytes = backend->traits().site_bytes;
    ASSERT_EQ(site_bytes, live + 4);
    for (const DiscoveredSite& s : module_.sites) {
      SCOPED_TRACE(s.name.empty() ? "unnamed record" : s.name);
      const std::vector<uint8_t> site = code_at(elf, s.entry, site_bytes);
      ASSERT_EQ(site.size(), site_bytes);
      // (An unnamed record's entry is the literal's NOPs: NOPs too,
      // though no thread runs them.)
      EXPECT_EQ(backend->classify_entry(s.entry, site).kind, SledKind::kNopSled);
      if (s.name.empty()) continue;

      // Someone else's instruction in the sled: refused, whichever word.
      for (uint32_t at : {0u, live}) {
        std::vector<uint8_t> patched = site;
        const uint32_t addi = 0x00150513;  // addi a0, a0, 1
        std::memcpy(patched.data() + at, &addi, 4);
        EXPECT_EQ(backend->classify_entry(s.entry, patched).kind, SledKind::kUnknown) << at;
      }
      // One 2-byte instruction among c.nops; half of each kind of NOP
      // (what rv64gc with =4,2 leaves at the entry: two c.nop, then the
      // body).
      for (uint32_t at : {2u, 6u}) {
        std::vector<uint8_t> patched = site;
        const uint16_t c_addi = 0x0505;  // c.addi a0, 1
        std::memcpy(patched.data() + at, &c_addi, 2);
        EXPECT_EQ(backend->classify_entry(s.entry, patched).kind, SledKind::kUnknown) << at;
      }
      std::vector<uint8_t> mixed(kCNopSled.begin(), kCNopSled.begin() + 4);
      mixed.insert(mixed.end(), kNopSled.begin(), kNopSled.begin() + 4);
      EXPECT_EQ(backend->classify_entry(s.entry, mixed).kind, SledKind::kUnknown);
      // An auipc t0 + jalr t0 pair found there: a call the pair's offsets
      // place relative to the entry.
      std::vector<uint8_t> pair(8);
      const uint32_t auipc = 0x12345297;  // auipc t0, 0x12345
      const uint32_t jalr = 0xff0282e7;   // jalr t0, -16(t0)
      std::memcpy(pair.data(), &auipc, 4);
      std::memcpy(pair.data() + 4, &jalr, 4);
      const SledInfo call = backend->classify_entry(s.entry, pair);
      EXPECT_EQ(call.kind, SledKind::kCall);
      EXPECT_EQ(call.call_target, s.entry + 0x12345000 - 16);
    }
  }
}

TEST_P(Riscv64DiscoveryTest, LoadBiasShiftsEveryAddress) {
  constexpr uint64_t kBias = 0x0000003f98760000;  // a page multiple, as the loader's
  auto shifted = discover_sites(img_, "shifted", kBias);
  ASSERT_TRUE(shifted.ok());
  ASSERT_EQ(shifted->sites.size(), module_.sites.size());
  for (size_t i = 0; i < module_.sites.size(); ++i) {
    const DiscoveredSite& a = module_.sites[i];
    const DiscoveredSite& b = shifted->sites[i];
    SCOPED_TRACE(a.name);
    EXPECT_EQ(b.record, a.record + kBias);
    EXPECT_EQ(b.entry, a.entry + kBias);
    EXPECT_EQ(b.entry % 8, a.entry % 8);
    EXPECT_EQ(b.symbol, a.name.empty() ? 0 : a.symbol + kBias);
    EXPECT_EQ(b.slot, a.slot_state == OpsSlot::kNone ? 0 : a.slot + kBias);
    EXPECT_EQ(b.slot_state, a.slot_state);
    EXPECT_EQ(b.prefix_bytes, a.prefix_bytes);
    EXPECT_EQ(b.pad_bytes, a.pad_bytes);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.demangled, a.demangled);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Riscv64DiscoveryTest, ::testing::ValuesIn(rv64_fixtures()),
                         [](const auto& p) { return test_name(p.param); });

// ============================================================================
// Landing pads: none on riscv64
// ============================================================================

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

// ============================================================================
// The executables are real programs
// ============================================================================

// Linked by each compiler's own driver (clang through the GNU cross
// linker): they must load and run, under qemu-riscv64 on an x86-64 host.
// fx_main exits 0 when the fixture functions it calls answer as written.
TEST(Riscv64DiscoveryFiles, ExecutablesRun) {
#ifndef FTJIT_RISCV64_RUNNER
  GTEST_SKIP() << "this test runs under qemu-user, where a guest cannot start another guest "
                  "(no binfmt_misc): the host build runs the fixtures";
#else
  size_t ran = 0;
  for (const auto& f : rv64_fixtures()) {
    if (f.kind != FixtureKind::kExecutable) continue;
    const std::string cmd = std::string(FTJIT_RISCV64_RUNNER) + " " + f.path();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ++ran;
  }
  EXPECT_EQ(ran, FTJIT_RISCV64_FIXTURE_HAVE_CLANG ? 4u : 2u);
#endif
}

}  // namespace
}  // namespace ftjit
